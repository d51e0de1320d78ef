// Package jsonpatch computes the RFC 6902 JSON patch that an admission
// webhook returns: the change a defaulting function made to an object,
// expressed against the object as the API server sent it.
//
//	patch, err := jsonpatch.Diff(raw, before, after)
//
// raw is the object as received; before is raw decoded into a Go type and
// encoded again (so it lacks fields the type does not know, and may show
// zero values raw omits); after is that Go value once the function changed
// it, encoded. Only what differs between before and after is patched, so
// fields the Go type drops are never removed, and each operation is valid
// against raw: a member is set with "add" (which also replaces), a value
// raw lacks is added whole at its nearest parent that raw has, and a
// member raw lacks is never removed.
package jsonpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Op is one operation of a patch.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Diff returns the patch, a JSON array, that makes raw change as before
// changed into after; nil when they are equal. Each argument must be one
// JSON value.
func Diff(raw, before, after []byte) ([]byte, error) {
	r, err := decode(raw)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: the object received: %w", err)
	}
	b, err := decode(before)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: the object before: %w", err)
	}
	a, err := decode(after)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: the object after: %w", err)
	}
	var ops []Op
	diff(&ops, "", r, b, a)
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// decode reads one JSON value, keeping numbers as written.
func decode(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	if err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// diff appends to ops what sets the value at path, raw in the received
// object (nil if absent there), from before to after.
func diff(ops *[]Op, path string, raw, before, after any) {
	if reflect.DeepEqual(before, after) {
		return
	}
	bm, bIsMap := before.(map[string]any)
	am, aIsMap := after.(map[string]any)
	rm, rIsMap := raw.(map[string]any)
	if bIsMap && aIsMap && rIsMap {
		diffObject(ops, path, rm, bm, am)
		return
	}
	ba, bIsList := before.([]any)
	aa, aIsList := after.([]any)
	ra, rIsList := raw.([]any)
	sameLen := len(ba) == len(aa) && len(ra) == len(aa)
	if bIsList && aIsList && rIsList && sameLen {
		for i := range aa {
			at := path + "/" + strconv.Itoa(i)
			diff(ops, at, ra[i], ba[i], aa[i])
		}
		return
	}
	op := Op{Op: "replace", Path: path, Value: after}
	*ops = append(*ops, op)
}

// diffObject is diff of three objects, member by member in sorted order.
func diffObject(ops *[]Op, path string, raw, before, after map[string]any) {
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		at := path + "/" + escape(k)
		b, inBefore := before[k]
		a, inAfter := after[k]
		r, inRaw := raw[k]
		switch {
		case inBefore && inAfter && inRaw:
			diff(ops, at, r, b, a)
		case inAfter && !reflect.DeepEqual(a, b):
			*ops = append(*ops, Op{Op: "add", Path: at, Value: a})
		case !inAfter && inRaw:
			*ops = append(*ops, Op{Op: "remove", Path: at})
		}
	}
}

// escape makes k one reference token of a JSON pointer (RFC 6901).
func escape(k string) string {
	k = strings.ReplaceAll(k, "~", "~0")
	return strings.ReplaceAll(k, "/", "~1")
}

// Package jsonpatch computes the RFC 6902 JSON patch that an admission
// webhook returns: the change a defaulting function made to an object,
// expressed against the object as the API server sent it.
//
//	patch, err := jsonpatch.Diff(raw, before, after)
//
// raw is the object as received; before is raw decoded into a Go type and
// encoded again, so it lacks the fields the type does not know and the
// values its encoding omits (omitempty, omitzero), and may show zero
// values raw lacks; after is that Go value once the function changed it,
// encoded. The patch is a three-way merge: it carries only what differs
// between before and after, onto raw.
//
//   - An object member is set where after's differs from before's.
//     When raw and after hold objects there (even if before omitted the
//     member), only the members inside are set, so members raw has and
//     the type lacks stay. Where raw lacks the member, it is added with
//     only the members after changed.
//   - A member before has and after lacks is removed, whole, if raw has
//     it: the function removed it (or set it to a value the type's
//     encoding omits). A member before lacks is never removed.
//   - A list that differs is matched item by item: the items equal in
//     before and after at its start and at its end are left as they are;
//     between them, the i-th item of before becomes the i-th of after
//     (changed member by member, keeping what the type lacks), the items
//     after has beyond are added there, and the items before has beyond
//     are removed. So changes in place, items appended or dropped at the
//     end, and one run of items inserted or removed anywhere keep each
//     received item's unknown members on that item; any other change of
//     the list's length keeps them at their index, on whatever item is
//     there after.
//   - Every operation is valid against raw at the point it is applied:
//     it names a member or item raw has, or adds one to a container raw
//     has. Values equal in before and after yield none.
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
	Op   string `json:"op"`
	Path string `json:"path"`
	// Value is the value of an add or replace; a remove has none.
	Value any `json:"value"`
}

// MarshalJSON writes op, with "value" (even a null one) unless op is a
// remove.
func (op Op) MarshalJSON() ([]byte, error) {
	if op.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{op.Op, op.Path})
	}
	type plain Op // without this method
	return json.Marshal(plain(op))
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
	diff(&ops, "", r, value{b, true}, a)
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

// value is a JSON value at some path of before, or its absence there
// (ok false): a value the encoding omitted, or a member the type lacks.
type value struct {
	v  any
	ok bool
}

// diff appends to ops what changes raw's value at path, which raw has, as
// before's changed into after's.
func diff(ops *[]Op, path string, raw any, before value, after any) {
	if before.ok && reflect.DeepEqual(before.v, after) {
		return
	}
	if !before.ok && reflect.DeepEqual(raw, after) {
		return
	}
	rm, rIsMap := raw.(map[string]any)
	am, aIsMap := after.(map[string]any)
	bm, bIsMap := before.v.(map[string]any)
	if rIsMap && aIsMap && (bIsMap || !before.ok) {
		diffObject(ops, path, rm, bm, am)
		return
	}
	ra, rIsList := raw.([]any)
	aa, aIsList := after.([]any)
	ba, bIsList := before.v.([]any)
	if rIsList && aIsList && bIsList && len(ra) == len(ba) {
		diffList(ops, path, ra, ba, aa)
		return
	}
	*ops = append(*ops, Op{Op: "replace", Path: path, Value: after})
}

// diffObject is diff of three objects, member by member in sorted order;
// before is nil where the encoding omitted it.
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
		case inAfter && inRaw:
			diff(ops, at, r, value{b, inBefore}, a)
		case inAfter:
			v, changed := added(value{b, inBefore}, a)
			if changed {
				*ops = append(*ops, Op{Op: "add", Path: at, Value: v})
			}
		case inBefore && inRaw:
			*ops = append(*ops, Op{Op: "remove", Path: at})
		}
	}
}

// added is what to add where raw has nothing for before to have become
// after: after's members that differ from before's, or after itself if
// either is no object; changed is false if nothing differs.
func added(before value, after any) (v any, changed bool) {
	if before.ok && reflect.DeepEqual(before.v, after) {
		return nil, false
	}
	bm, bIsMap := before.v.(map[string]any)
	am, aIsMap := after.(map[string]any)
	if !bIsMap || !aIsMap {
		return after, true
	}
	members := map[string]any{}
	for k, a := range am {
		b, inBefore := bm[k]
		v, changed := added(value{b, inBefore}, a)
		if changed {
			members[k] = v
		}
	}
	return members, len(members) > 0
}

// diffList is diff of three lists, raw and before of one length: the
// items equal in before and after at either end are left alone, and the
// ones between are changed index by index, then added or removed at the
// end of that stretch.
func diffList(ops *[]Op, path string, raw, before, after []any) {
	head := 0
	for head < len(before) && head < len(after) && reflect.DeepEqual(before[head], after[head]) {
		head++
	}
	tail := 0
	for tail < len(before)-head && tail < len(after)-head &&
		reflect.DeepEqual(before[len(before)-1-tail], after[len(after)-1-tail]) {
		tail++
	}
	bEnd := len(before) - tail
	aEnd := len(after) - tail
	i := head
	for i < bEnd && i < aEnd {
		diff(ops, path+"/"+strconv.Itoa(i), raw[i], value{before[i], true}, after[i])
		i++
	}
	for j := i; j < aEnd; j++ {
		*ops = append(*ops, Op{Op: "add", Path: path + "/" + strconv.Itoa(j), Value: after[j]})
	}
	for j := bEnd - 1; j >= i; j-- {
		*ops = append(*ops, Op{Op: "remove", Path: path + "/" + strconv.Itoa(j)})
	}
}

// escape makes k one reference token of a JSON pointer (RFC 6901).
func escape(k string) string {
	k = strings.ReplaceAll(k, "~", "~0")
	return strings.ReplaceAll(k, "/", "~1")
}

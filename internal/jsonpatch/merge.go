package jsonpatch

import (
	"encoding/json"
	"errors"
	"reflect"
)

// MergePatch is the JSON merge patch (RFC 7386) that turns before into
// after, two values that encode as JSON objects (kctl's CreateOrUpdate and
// CreateOrPatch): MergeDiff of their encodings.
func MergePatch(before, after any) (map[string]any, error) {
	was, errBefore := decodeObject(before)
	is, errAfter := decodeObject(after)
	err := errors.Join(errBefore, errAfter)
	if err != nil {
		return nil, err
	}
	return MergeDiff(was, is), nil
}

// decodeObject is v encoded as JSON and decoded as an object.
func decodeObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	var m map[string]any
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	return m, err
}

// MergeDiff is the JSON merge patch (RFC 7386) that turns a into b,
// both decoded JSON objects.
func MergeDiff(a, b map[string]any) map[string]any {
	d := map[string]any{}
	for k := range a {
		if _, ok := b[k]; !ok {
			d[k] = nil
		}
	}
	for k, bv := range b {
		am, aok := a[k].(map[string]any)
		bm, bok := bv.(map[string]any)
		if aok && bok {
			sub := MergeDiff(am, bm)
			if len(sub) > 0 {
				d[k] = sub
			}
			continue
		}
		av, ok := a[k]
		if !ok || !reflect.DeepEqual(av, bv) {
			d[k] = bv
		}
	}
	return d
}

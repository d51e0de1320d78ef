package jsonpatch

import "reflect"

// MergeDiff is the JSON merge patch (RFC 7386) that turns a into b,
// both decoded JSON objects (kctl's CreateOrPatch).
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

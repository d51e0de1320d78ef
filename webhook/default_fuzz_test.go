package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/kctl-dev/kctl/internal/jsonpatch/patchtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fuzzed is the type of FuzzDefaultPatch: each way a Go encoding shows or
// omits a value (omitempty, omitzero, a pointer, none), a list, a map.
// Whatever the fuzzer adds under the name "u" the type lacks.
type fuzzed struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              fuzzedSpec `json:"spec"`
}

type fuzzedSpec struct {
	Size   int                       `json:"size,omitempty"`
	Name   string                    `json:"name"`
	Limits assemblyLimits            `json:"limits,omitzero"`
	Ptr    *assemblyLimits           `json:"ptr,omitempty"`
	Parts  []assemblyPart            `json:"parts,omitempty"`
	ByName map[string]assemblyLimits `json:"byName,omitempty"`
}

// FuzzDefaultPatch: for a received object, with fields the type lacks at
// every depth, and a defaulting function, both made from the input, the
// patch kctl answers applies (with the API server's applier) and gives
// the received object with the function's own changes, computed here
// from the typed values before and after it, field by field. Where the
// function reshaped parts beyond what Default promises to follow item by
// item, parts must still decode to what the function left.
func FuzzDefaultPatch(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("\x07\x01\x05\x05\x04\x04\x03\x03\x02\x06\x03\x06\x06\x03\x00\x06\x04\x01"))
	f.Add([]byte("\x01\x01\x02\x03\x01\x04\x03\x02\x01\x02\x03\x09\x06\x01\x06\x06\x03\x02\x05\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{b: data}
		raw, err := json.Marshal(fuzzRaw(in))
		if err != nil {
			t.Fatal(err)
		}
		edits := in.b
		var before, after fuzzed
		if err := json.Unmarshal(raw, &before); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var afterJSON []byte
		patch, denial := defaultPatch(context.Background(), func(_ context.Context, o *fuzzed) error {
			fuzzEdit(o, &fuzzBytes{b: edits})
			afterJSON, err = json.Marshal(o)
			return err
		}, raw)
		if denial != nil {
			t.Fatalf("denied: %s", denial.Result.Message)
		}
		if err := json.Unmarshal(afterJSON, &after); err != nil {
			t.Fatal(err)
		}
		got := raw
		if patch != nil {
			var err error
			got, err = patchtest.Apply(raw, patch)
			if err != nil {
				t.Fatalf("patch %s does not apply to %s: %v", patch, raw, err)
			}
		}
		var decoded fuzzed
		if err := json.Unmarshal(got, &decoded); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(decoded); !bytes.Equal(again, afterJSON) {
			t.Fatalf("patched %s decodes to %s, the function left %s\npatch %s", raw, again, afterJSON, patch)
		}
		gotDoc := decodeNumbers(t, got)
		want := decodeNumbers(t, raw)
		exact := fuzzExpected(want.(map[string]any), &before, &after)
		if !exact { // compare the rest; parts decoded as the function left them, above
			gotSpec, _ := gotDoc.(map[string]any)["spec"].(map[string]any)
			wantSpec, _ := want.(map[string]any)["spec"].(map[string]any)
			delete(gotSpec, "parts")
			delete(wantSpec, "parts")
		}
		if !reflect.DeepEqual(gotDoc, want) {
			g, _ := json.Marshal(gotDoc)
			w, _ := json.Marshal(want)
			t.Fatalf("patch %s on\n%s\ngives %s\nwant  %s", patch, raw, g, w)
		}
	})
}

// fuzzBytes hands out the fuzzer's bytes as small choices; 0 once used up.
type fuzzBytes struct{ b []byte }

func (in *fuzzBytes) pick(n int) int {
	if len(in.b) == 0 {
		return 0
	}
	v := int(in.b[0]) % n
	in.b = in.b[1:]
	return v
}

// fuzzUnknowns are the values of the members "u" that fuzzed lacks.
var fuzzUnknowns = []string{`"s"`, `1.50`, `{"z":[1,{"q":"s"}]}`, `[]`, `null`, `{}`, `-0`}

// fuzzRaw makes a received object from in: each field of fuzzed absent,
// null, empty or set, with a member "u" the type lacks beside most.
func fuzzRaw(in *fuzzBytes) map[string]any {
	unknown := func(m map[string]any) map[string]any {
		if in.pick(3) > 0 {
			m["u"] = json.RawMessage(fuzzUnknowns[in.pick(len(fuzzUnknowns))])
		}
		return m
	}
	limits := func() any {
		return []any{nil, map[string]any{}, map[string]any{"max": 0}, map[string]any{"max": 1 + in.pick(2)}}[in.pick(4)]
	}
	object := func(m map[string]any, key string, v func() any) {
		switch in.pick(3) {
		case 1:
			m[key] = v()
		case 2:
			if o, ok := v().(map[string]any); ok {
				m[key] = unknown(o)
			}
		}
	}
	labels := []any{nil, map[string]any{}, map[string]any{"x": "1"}, map[string]any{"x": "1", "a/b~c": "2"}}[in.pick(4)]
	meta := map[string]any{"name": "f"}
	if labels != nil {
		meta["labels"] = labels
	}
	obj := unknown(map[string]any{"apiVersion": "v1", "kind": "Fuzzed", "metadata": meta})
	if in.pick(8) == 0 {
		return obj
	}
	spec := unknown(map[string]any{})
	obj["spec"] = spec
	size := in.pick(5)
	if size > 0 {
		spec["size"] = size - 1
	}
	name := in.pick(3)
	if name > 0 {
		spec["name"] = []string{"", "n"}[name-1]
	}
	object(spec, "limits", limits)
	object(spec, "ptr", limits)
	switch in.pick(5) {
	case 1:
		spec["parts"] = nil
	case 2:
		spec["parts"] = []any{}
	case 3, 4:
		var parts []any
		for i := range 1 + in.pick(4) {
			p := unknown(map[string]any{"name": fmt.Sprintf("p%d", i)})
			size := in.pick(3)
			if size > 0 {
				p["size"] = size - 1
			}
			parts = append(parts, p)
		}
		spec["parts"] = parts
	}
	keys := in.pick(5)
	if keys > 0 {
		byName := map[string]any{}
		for _, k := range []string{"k0", "a/b", "c~d"}[:keys-1] {
			object(byName, k, limits)
		}
		spec["byName"] = byName
	}
	return obj
}

// fuzzEdit is the defaulting function: edits of o chosen by in.
func fuzzEdit(o *fuzzed, in *fuzzBytes) {
	s := &o.Spec
	fresh := 0
	for range in.pick(10) {
		switch in.pick(9) {
		case 0:
			s.Size = in.pick(4)
		case 1:
			s.Name = []string{"", "n", "m"}[in.pick(3)]
		case 2:
			s.Limits.Max = in.pick(3)
		case 3:
			s.Ptr = nil
		case 4:
			if s.Ptr == nil {
				s.Ptr = &assemblyLimits{}
			}
			s.Ptr.Max = in.pick(3)
		case 5:
			if o.Labels == nil {
				o.Labels = map[string]string{}
			}
			k := []string{"x", "a/b~c", "y"}[in.pick(3)]
			if in.pick(2) == 0 {
				delete(o.Labels, k)
			} else {
				o.Labels[k] = strconv.Itoa(in.pick(2))
			}
		case 6:
			if s.ByName == nil {
				s.ByName = map[string]assemblyLimits{}
			}
			k := []string{"k0", "a/b", "c~d", "new"}[in.pick(4)]
			if in.pick(2) == 0 {
				delete(s.ByName, k)
			} else {
				s.ByName[k] = assemblyLimits{Max: in.pick(3)}
			}
		default:
			fresh++
			editParts(s, fmt.Sprintf("n%d", fresh), in)
		}
	}
}

// editParts changes s.Parts in one way chosen by in; a new item is named
// name.
func editParts(s *fuzzedSpec, name string, in *fuzzBytes) {
	n := len(s.Parts)
	switch in.pick(5) {
	case 0:
		if n > 0 {
			s.Parts[in.pick(n)].Size = in.pick(3)
		}
	case 1:
		s.Parts = append(s.Parts, assemblyPart{Name: name, Size: in.pick(2)})
	case 2:
		if n > 0 {
			s.Parts = s.Parts[:n-1]
		}
	case 3:
		s.Parts = slices.Insert(s.Parts, in.pick(n+1), assemblyPart{Name: name})
	case 4:
		if n > 0 {
			i := in.pick(n)
			s.Parts = slices.Delete(s.Parts, i, i+1)
		}
	}
}

// fuzzExpected changes doc, the received object, as the function changed
// before into after, field by field of fuzzed; exact is false if the
// parts it wrote are not what the patch promises (see partsFollowed).
func fuzzExpected(doc map[string]any, before, after *fuzzed) (exact bool) {
	meta := doc["metadata"].(map[string]any)
	mergeMap(meta, "labels", before.Labels, after.Labels, func(_ any, _, a string) any { return a })
	b := &before.Spec
	a := &after.Spec
	if reflect.DeepEqual(jsonValue(b), jsonValue(a)) {
		return true
	}
	spec, ok := doc["spec"].(map[string]any)
	if !ok {
		spec = map[string]any{}
		doc["spec"] = spec
	}
	if b.Size != a.Size {
		setOrDelete(spec, "size", a.Size == 0, a.Size)
	}
	if b.Name != a.Name {
		spec["name"] = a.Name
	}
	if b.Limits != a.Limits {
		setObject(spec, "limits", a.Limits == assemblyLimits{}, b.Limits, a.Limits)
	}
	switch {
	case b.Ptr == nil && a.Ptr == nil:
	case b.Ptr == nil || a.Ptr == nil:
		setOrDelete(spec, "ptr", a.Ptr == nil, a.Ptr)
	case *b.Ptr != *a.Ptr:
		setObject(spec, "ptr", false, *b.Ptr, *a.Ptr)
	}
	mergeMap(spec, "byName", b.ByName, a.ByName, func(raw any, b, a assemblyLimits) any {
		m, ok := raw.(map[string]any)
		if !ok {
			return jsonValue(a)
		}
		mergeLimits(m, b, a)
		return m
	})
	return mergeParts(spec, b.Parts, a.Parts)
}

// setOrDelete sets m[k] to v as JSON, or deletes it if omitted.
func setOrDelete(m map[string]any, k string, omitted bool, v any) {
	if omitted {
		delete(m, k)
		return
	}
	m[k] = jsonValue(v)
}

// setObject changes the limits m[k] from b to a: deleted if omitted,
// changed member by member if m[k] is an object, else set.
func setObject(m map[string]any, k string, omitted bool, b, a assemblyLimits) {
	r, ok := m[k].(map[string]any)
	if omitted || !ok {
		setOrDelete(m, k, omitted, a)
		return
	}
	mergeLimits(r, b, a)
}

func mergeLimits(r map[string]any, b, a assemblyLimits) {
	if b.Max != a.Max {
		setOrDelete(r, "max", a.Max == 0, a.Max)
	}
}

// mergeMap changes the map m[k] from b to a, each value changed by
// merge(what m[k] holds for its key, b's, a's).
func mergeMap[V comparable](m map[string]any, k string, b, a map[string]V, merge func(raw any, b, a V) any) {
	if maps.Equal(b, a) {
		return
	}
	r, ok := m[k].(map[string]any)
	if len(a) == 0 || !ok {
		setOrDelete(m, k, len(a) == 0, a)
		return
	}
	for key := range b {
		_, kept := a[key]
		if !kept {
			delete(r, key)
		}
	}
	for key, av := range a {
		bv, had := b[key]
		if !had || bv != av {
			r[key] = merge(r[key], bv, av)
		}
	}
}

// mergeParts changes m's parts from b to a, each received item following
// its name (each name is one item's); exact is false if the function
// changed parts in a way the patch does not follow item by item.
func mergeParts(m map[string]any, b, a []assemblyPart) (exact bool) {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	r, ok := m["parts"].([]any)
	if len(a) == 0 || len(b) == 0 || !ok {
		setOrDelete(m, "parts", len(a) == 0, a)
		return true
	}
	var parts []any
	for _, ap := range a {
		i := slices.IndexFunc(b, func(bp assemblyPart) bool { return bp.Name == ap.Name })
		if i < 0 {
			parts = append(parts, jsonValue(ap))
			continue
		}
		item := r[i].(map[string]any)
		if b[i].Size != ap.Size {
			setOrDelete(item, "size", ap.Size == 0, ap.Size)
		}
		parts = append(parts, item)
	}
	m["parts"] = parts
	return partsFollowed(b, a)
}

// partsFollowed says whether Default promises to keep each item's
// unknown fields on it for parts changed from b to a: the same items at
// the indices both have (changed in place, appended, dropped at the end),
// or one run inserted or removed with the others unchanged.
func partsFollowed(b, a []assemblyPart) bool {
	n := min(len(a), len(b))
	if slices.EqualFunc(a[:n], b[:n], func(x, y assemblyPart) bool { return x.Name == y.Name }) {
		return true
	}
	head := 0
	for head < n && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < n-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	return head+tail == n
}

// jsonValue is v encoded and decoded, numbers as written.
func jsonValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var out any
	d.Decode(&out)
	return out
}

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

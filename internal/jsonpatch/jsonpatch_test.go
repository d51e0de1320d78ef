package jsonpatch

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/jsonpatch/patchtest"
)

// apply applies patch to doc as the API server does (the same library),
// failing on any operation invalid against doc.
func apply(t *testing.T, doc string, patch []byte) any {
	t.Helper()
	if patch == nil {
		v, _ := decode([]byte(doc))
		return v
	}
	out, err := patchtest.Apply([]byte(doc), patch)
	if err != nil {
		t.Fatalf("patch %s on %s: %v", patch, doc, err)
	}
	v, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDiff_PatchChangesOnlyWhatChanged(t *testing.T) {
	tests := []struct {
		name               string
		raw, before, after string
		want               string // raw with the patch applied
	}{
		{"equal", `{"a":1,"x":"kept"}`, `{"a":1}`, `{"a":1}`, `{"a":1,"x":"kept"}`},
		{"set a scalar, keep unknown fields",
			`{"spec":{"n":1,"unknown":true}}`, `{"spec":{"n":1}}`, `{"spec":{"n":2}}`,
			`{"spec":{"n":2,"unknown":true}}`},
		{"add a member raw lacks under a zero value the type shows: only what changed",
			`{"metadata":{}}`, `{"metadata":{},"spec":{"n":0,"s":""}}`, `{"metadata":{},"spec":{"n":3,"s":""}}`,
			`{"metadata":{},"spec":{"n":3}}`},
		{"add a label with an escaped key",
			`{"metadata":{"labels":{"a":"b"}}}`, `{"metadata":{"labels":{"a":"b"}}}`,
			`{"metadata":{"labels":{"a":"b","x/y~z":"1"}}}`,
			`{"metadata":{"labels":{"a":"b","x/y~z":"1"}}}`},
		{"change under escaped keys",
			`{"a/b":{"~c":{"n":1,"u":1}}}`, `{"a/b":{"~c":{"n":1}}}`, `{"a/b":{"~c":{"n":2}}}`,
			`{"a/b":{"~c":{"n":2,"u":1}}}`},
		{"remove a member", `{"a":1,"b":2}`, `{"a":1,"b":2}`, `{"a":1}`, `{"a":1}`},
		{"never remove what raw lacks", `{"a":1}`, `{"a":1,"b":0}`, `{"a":1}`, `{"a":1}`},
		{"a value omitted on both sides is no change",
			`{"l":{"u":5}}`, `{}`, `{}`, `{"l":{"u":5}}`},
		{"a value the encoding omitted before is set member by member",
			`{"spec":{"limits":{"burst":5}}}`, `{"spec":{}}`, `{"spec":{"limits":{"max":3}}}`,
			`{"spec":{"limits":{"burst":5,"max":3}}}`},
		{"a value the encoding omitted before, unchanged where raw has it",
			`{"l":{"max":0,"u":1}}`, `{}`, `{"l":{"max":0,"min":2}}`,
			`{"l":{"max":0,"min":2,"u":1}}`},
		{"an empty list the encoding omitted is replaced",
			`{"l":[]}`, `{}`, `{"l":[1]}`, `{"l":[1]}`},
		{"a null value is written, not dropped",
			`{"p":{"u":1}}`, `{"p":{}}`, `{"p":null}`, `{"p":null}`},
		{"a list element in place",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2}]}`, `{"l":[{"n":1},{"n":2}]}`, `{"l":[{"n":1},{"n":5}]}`,
			`{"l":[{"n":1,"u":1},{"n":5,"u":2}]}`},
		{"a list that grows keeps its items' unknown fields",
			`{"l":[{"n":1,"u":1}]}`, `{"l":[{"n":1}]}`, `{"l":[{"n":2},{"n":3},{"n":4}]}`,
			`{"l":[{"n":2,"u":1},{"n":3},{"n":4}]}`},
		{"a list that shrinks at its end",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2},{"n":3,"u":3}]}`, `{"l":[{"n":1},{"n":2},{"n":3}]}`, `{"l":[{"n":9}]}`,
			`{"l":[{"n":9,"u":1}]}`},
		{"items inserted in the middle",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2}]}`, `{"l":[{"n":1},{"n":2}]}`, `{"l":[{"n":1},{"n":7},{"n":8},{"n":2}]}`,
			`{"l":[{"n":1,"u":1},{"n":7},{"n":8},{"n":2,"u":2}]}`},
		{"an item inserted first",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2}]}`, `{"l":[{"n":1},{"n":2}]}`, `{"l":[{"n":0},{"n":1},{"n":2}]}`,
			`{"l":[{"n":0},{"n":1,"u":1},{"n":2,"u":2}]}`},
		{"items removed from the middle",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2},{"n":3,"u":3},{"n":4,"u":4}]}`, `{"l":[{"n":1},{"n":2},{"n":3},{"n":4}]}`,
			`{"l":[{"n":1},{"n":4}]}`,
			`{"l":[{"n":1,"u":1},{"n":4,"u":4}]}`},
		{"an item inserted and another changed: unknown fields stay at their index",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2}]}`, `{"l":[{"n":1},{"n":2}]}`, `{"l":[{"n":0},{"n":1},{"n":5}]}`,
			`{"l":[{"n":0,"u":1},{"n":1,"u":2},{"n":5}]}`},
		{"lists in list items",
			`{"l":[{"m":[{"k":1,"u":1}],"u":0}]}`, `{"l":[{"m":[{"k":1}]}]}`, `{"l":[{"m":[{"k":1},{"k":2}]}]}`,
			`{"l":[{"m":[{"k":1,"u":1},{"k":2}],"u":0}]}`},
		{"a map value changed, another added, another removed",
			`{"m":{"a":{"max":1,"u":1},"b":{"max":2,"u":2},"c":{"max":3,"u":3}}}`,
			`{"m":{"a":{"max":1},"b":{"max":2},"c":{"max":3}}}`,
			`{"m":{"a":{"max":9},"c":{"max":3},"d":{"max":4}}}`,
			`{"m":{"a":{"max":9,"u":1},"c":{"max":3,"u":3},"d":{"max":4}}}`},
		{"big numbers kept exactly", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`,
			`{"n":12345678901234567891}`, `{"n":12345678901234567891}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := Diff([]byte(tt.raw), []byte(tt.before), []byte(tt.after))
			if err != nil {
				t.Fatal(err)
			}
			got := apply(t, tt.raw, patch)
			want, _ := decode([]byte(tt.want))
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("patch %s gives %s, want %s", patch, g, tt.want)
			}
			if tt.raw == tt.want && patch != nil {
				t.Errorf("patch %s for no change, want nil", patch)
			}
		})
	}
}

// TestDiff_OperationsAreMinimal: the patch names exactly the values that
// changed, and a remove carries no value.
func TestDiff_OperationsAreMinimal(t *testing.T) {
	patch, err := Diff([]byte(`{"l":[{"n":1,"u":1},{"n":2}],"s":{"a":1,"b":2}}`),
		[]byte(`{"l":[{"n":1},{"n":2}],"s":{"a":1,"b":2}}`),
		[]byte(`{"l":[{"n":1},{"n":3},{"n":4}],"s":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/l/1/n","value":3},{"op":"add","path":"/l/2","value":{"n":4}},{"op":"remove","path":"/s/b"}]`
	if string(patch) != want {
		t.Errorf("patch = %s, want %s", patch, want)
	}
	if strings.Contains(string(patch), `"u"`) {
		t.Errorf("patch %s names a member the type lacks", patch)
	}
}

func TestDiff_RejectsInvalidJSON(t *testing.T) {
	for _, bad := range []string{``, `{`, `{} {}`} {
		if _, err := Diff([]byte(bad), []byte(`{}`), []byte(`{}`)); err == nil {
			t.Errorf("Diff(%q) succeeded", bad)
		}
	}
}

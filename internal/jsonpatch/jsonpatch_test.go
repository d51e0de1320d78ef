package jsonpatch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// apply is a minimal RFC 6902 applier (add, replace, remove) that fails on
// any operation invalid against doc, as the API server's would.
func apply(t *testing.T, doc string, patch []byte) any {
	t.Helper()
	v, err := decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var ops []Op
	if len(patch) > 0 {
		d := json.NewDecoder(bytes.NewReader(patch))
		d.UseNumber()
		if err := d.Decode(&ops); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range ops {
		if op.Path == "" {
			v = op.Value
			continue
		}
		tokens := strings.Split(op.Path[1:], "/")
		parent := v
		for _, tok := range tokens[:len(tokens)-1] {
			parent = child(t, parent, unescape(tok), op)
		}
		last := unescape(tokens[len(tokens)-1])
		switch p := parent.(type) {
		case map[string]any:
			_, exists := p[last]
			switch {
			case op.Op == "remove" && exists:
				delete(p, last)
			case op.Op == "add", op.Op == "replace" && exists:
				p[last] = op.Value
			default:
				t.Fatalf("%v: no member %q", op, last)
			}
		case []any:
			i, err := strconv.Atoi(last)
			if err != nil || i >= len(p) || op.Op != "replace" {
				t.Fatalf("%v: unsupported on a list", op)
			}
			p[i] = op.Value
		default:
			t.Fatalf("%v: parent is not a container", op)
		}
	}
	return v
}

func child(t *testing.T, v any, tok string, op Op) any {
	t.Helper()
	switch c := v.(type) {
	case map[string]any:
		next, ok := c[tok]
		if !ok {
			t.Fatalf("%v: no member %q", op, tok)
		}
		return next
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i >= len(c) {
			t.Fatalf("%v: no index %q", op, tok)
		}
		return c[i]
	}
	t.Fatalf("%v: %q is in no container", op, tok)
	return nil
}

func unescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
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
		{"add a member raw lacks under a zero value the type shows",
			`{"metadata":{}}`, `{"metadata":{},"spec":{"n":0}}`, `{"metadata":{},"spec":{"n":3}}`,
			`{"metadata":{},"spec":{"n":3}}`},
		{"add a label with an escaped key",
			`{"metadata":{"labels":{"a":"b"}}}`, `{"metadata":{"labels":{"a":"b"}}}`,
			`{"metadata":{"labels":{"a":"b","x/y~z":"1"}}}`,
			`{"metadata":{"labels":{"a":"b","x/y~z":"1"}}}`},
		{"remove a member", `{"a":1,"b":2}`, `{"a":1,"b":2}`, `{"a":1}`, `{"a":1}`},
		{"never remove what raw lacks", `{"a":1}`, `{"a":1,"b":0}`, `{"a":1}`, `{"a":1}`},
		{"a list element in place",
			`{"l":[{"n":1,"u":1},{"n":2,"u":2}]}`, `{"l":[{"n":1},{"n":2}]}`, `{"l":[{"n":1},{"n":5}]}`,
			`{"l":[{"n":1,"u":1},{"n":5,"u":2}]}`},
		{"a list that grows is replaced", `{"l":[1]}`, `{"l":[1]}`, `{"l":[1,2]}`, `{"l":[1,2]}`},
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
			if tt.name == "equal" && patch != nil {
				t.Errorf("patch %s for no change, want nil", patch)
			}
		})
	}
}

func TestDiff_RejectsInvalidJSON(t *testing.T) {
	for _, bad := range []string{``, `{`, `{} {}`} {
		if _, err := Diff([]byte(bad), []byte(`{}`), []byte(`{}`)); err == nil {
			t.Errorf("Diff(%q) succeeded", bad)
		}
	}
}

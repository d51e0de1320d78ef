package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// assembly is the CRD type of the defaulting tests. Its CRD's schema has
// fields the Go type lacks at every depth: extra (top level), spec.note,
// spec.limits.burst (in an object the Go encoding omits when zero),
// spec.parts[].color (in list items) and spec.byName[*].burst (in map
// values).
type assembly struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              assemblySpec `json:"spec"`
}

type assemblySpec struct {
	Size   int                       `json:"size,omitempty"`
	Limits assemblyLimits            `json:"limits,omitzero"`
	Parts  []assemblyPart            `json:"parts,omitempty"`
	ByName map[string]assemblyLimits `json:"byName,omitempty"`
}

type assemblyLimits struct {
	Max int `json:"max,omitempty"`
}

type assemblyPart struct {
	Name string `json:"name"`
	Size int    `json:"size,omitempty"`
}

var _ = kctl.Declare[assembly](kctl.Resource{Group: "webhook.kctl.dev", Version: "v1", Kind: "Assembly", Namespaced: true})

const assemblyCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"assemblies.webhook.kctl.dev"},
 "spec":{"group":"webhook.kctl.dev","scope":"Namespaced",
  "names":{"plural":"assemblies","singular":"assembly","kind":"Assembly","listKind":"AssemblyList"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
    "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
    "extra":{"type":"object","properties":{"a":{"type":"string"},"n":{"type":"integer"}}},
    "spec":{"type":"object","properties":{
     "size":{"type":"integer"},
     "note":{"type":"string"},
     "limits":{"type":"object","properties":{"max":{"type":"integer"},"burst":{"type":"integer"}}},
     "parts":{"type":"array","items":{"type":"object","properties":{
      "name":{"type":"string"},"size":{"type":"integer"},"color":{"type":"string"},
      "tags":{"type":"array","items":{"type":"string"}}}}},
     "byName":{"type":"object","additionalProperties":{"type":"object","properties":{
      "max":{"type":"integer"},"burst":{"type":"integer"}}}}}}}}}}]}}`

// installAssemblyCRD installs the assembly CRD unless it is served already
// (tests share it; none deletes it).
func installAssemblyCRD(t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", assemblyCRD)
	eventually(t, "the assembly CRD served", func() bool {
		code, _ := testRawRequest(t, cfg, "GET", "/apis/webhook.kctl.dev/v1/namespaces/"+ns+"/assemblies", "")
		return code == 200
	})
}

// assemblyDefaults are the defaulting functions of
// TestWebhooks_RealAPIServer_DefaultKeepsFieldsTheTypeLacks, by the name
// of the object they default.
var assemblyDefaults = map[string]func(a *assemblySpec){
	"add": func(a *assemblySpec) {
		a.Size = 1
		a.Limits.Max = 3 // limits was omitted: it held only burst
		a.Parts[0].Size = 1
		a.Parts = append(a.Parts, assemblyPart{Name: "b", Size: 2})
		a.ByName["x"] = assemblyLimits{Max: 4}
		a.ByName["y"] = assemblyLimits{Max: 1}
	},
	"change": func(a *assemblySpec) {
		a.Size = 3
		a.Limits.Max = 2
		a.Parts[0].Name = "a2"
		a.Parts[1].Size = 5
		a.ByName["x"] = assemblyLimits{Max: 9}
	},
	"remove": func(a *assemblySpec) {
		a.Size = 0
		a.Parts = a.Parts[:1]
		delete(a.ByName, "y")
	},
	"insert-first": func(a *assemblySpec) {
		a.Parts = slices.Insert(a.Parts, 0, assemblyPart{Name: "new"})
	},
	"remove-middle": func(a *assemblySpec) {
		a.Parts = slices.Delete(a.Parts, 1, 2)
	},
	"insert-and-change": func(a *assemblySpec) {
		a.Parts = slices.Insert(a.Parts, 0, assemblyPart{Name: "new"})
		a.Parts[2].Size = 5
	},
	"grow": func(a *assemblySpec) {
		a.Parts = append(a.Parts, assemblyPart{Name: fmt.Sprintf("p%d", len(a.Parts))})
	},
}

// TestWebhooks_RealAPIServer_DefaultKeepsFieldsTheTypeLacks: through the
// real API server, a Default function that adds, changes and removes
// fields, map entries and list items changes only those; every field the
// Go type lacks (at the top level, in a nested object, in list items, in
// map values) is stored byte for byte as sent, except inside what the
// function removed. Issue 33: a list that changed length, and an object
// the Go encoding had omitted, were replaced whole.
func TestWebhooks_RealAPIServer_DefaultKeepsFieldsTheTypeLacks(t *testing.T) {
	f := newWebhookFixture(t)
	installAssemblyCRD(t, f.cfg, f.ns)
	Default(f.hooks, func(ctx context.Context, a *assembly) error {
		def, ok := assemblyDefaults[strings.TrimRight(a.Name, "0123456789")]
		if ok {
			def(&a.Spec)
		}
		if a.Labels == nil {
			a.Labels = map[string]string{}
		}
		a.Labels["defaulted"] = "true"
		return nil
	})
	f.start(t)
	w := webhookConfig{name: "mutate.assemblies.kctl.dev", url: "https://" + f.addr + "/mutate-webhook-kctl-dev-v1-assembly",
		caBundle: f.ca.PEM(), ns: f.ns, resource: "assemblies.webhook.kctl.dev", failurePolicy: "Fail", timeout: 10}
	defer applyWebhooks(t, f.cfg, "Mutating", w.name, w)()
	assemblies := "/apis/webhook.kctl.dev/v1/namespaces/" + f.ns + "/assemblies"
	i := 0
	eventually(t, "the webhook active", func() bool {
		i++
		r := testRequest(t, f.cfg, "POST", assemblies, assemblyJSON(fmt.Sprintf("probe%d", i), `{}`))
		return r.code == 201 && strings.Contains(string(r.body), `"defaulted":"true"`)
	})
	const extra = `{"a":"top","n":1}`
	for _, tc := range []struct {
		name       string
		spec, want string // compact, members sorted: as the API server writes
	}{
		{"add",
			`{"byName":{"x":{"burst":7}},"limits":{"burst":5},"note":"n","parts":[{"color":"red","name":"a","tags":["t"]}]}`,
			`{"byName":{"x":{"burst":7,"max":4},"y":{"max":1}},"limits":{"burst":5,"max":3},"note":"n",` +
				`"parts":[{"color":"red","name":"a","size":1,"tags":["t"]},{"name":"b","size":2}],"size":1}`},
		{"change",
			`{"byName":{"x":{"burst":7,"max":1}},"limits":{"burst":5,"max":1},"note":"n",` +
				`"parts":[{"color":"red","name":"a","size":1},{"color":"blue","name":"b","size":1}],"size":2}`,
			`{"byName":{"x":{"burst":7,"max":9}},"limits":{"burst":5,"max":2},"note":"n",` +
				`"parts":[{"color":"red","name":"a2","size":1},{"color":"blue","name":"b","size":5}],"size":3}`},
		{"remove",
			`{"byName":{"x":{"burst":7,"max":1},"y":{"burst":8,"max":2}},"limits":{"burst":5},"note":"n",` +
				`"parts":[{"color":"red","name":"a"},{"color":"blue","name":"b"},{"color":"green","name":"c"}],"size":2}`,
			`{"byName":{"x":{"burst":7,"max":1}},"limits":{"burst":5},"note":"n","parts":[{"color":"red","name":"a"}]}`},
		{"insert-first",
			`{"note":"n","parts":[{"color":"red","name":"a"},{"color":"blue","name":"b"}]}`,
			`{"note":"n","parts":[{"name":"new"},{"color":"red","name":"a"},{"color":"blue","name":"b"}]}`},
		{"remove-middle",
			`{"parts":[{"color":"red","name":"a"},{"color":"blue","name":"b"},{"color":"green","name":"c"}]}`,
			`{"parts":[{"color":"red","name":"a"},{"color":"green","name":"c"}]}`},
		// As Default documents: an insertion with another change is
		// applied by index, so the colors stay at their index.
		{"insert-and-change",
			`{"parts":[{"color":"red","name":"a"},{"color":"blue","name":"b"}]}`,
			`{"parts":[{"color":"red","name":"new"},{"color":"blue","name":"a"},{"name":"b","size":5}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRequest(t, f.cfg, "POST", assemblies, assemblyJSON(tc.name, tc.spec))
			if r.code != 201 {
				t.Fatalf("POST = %d %s", r.code, r.body)
			}
			wantStored(t, r.body, extra, tc.want)
		})
	}

	t.Run("update", func(t *testing.T) {
		r := testRequest(t, f.cfg, "POST", assemblies, assemblyJSON("grow", `{"parts":[{"color":"red","name":"a"}]}`))
		if r.code != 201 {
			t.Fatalf("POST = %d %s", r.code, r.body)
		}
		wantStored(t, r.body, extra, `{"parts":[{"color":"red","name":"a"},{"name":"p1"}]}`)
		var obj map[string]any
		json.Unmarshal(r.body, &obj)
		parts := obj["spec"].(map[string]any)["parts"].([]any)
		parts[1].(map[string]any)["color"] = "pink"
		body, _ := json.Marshal(obj)
		r = testRequest(t, f.cfg, "PUT", assemblies+"/grow", string(body))
		if r.code != 200 {
			t.Fatalf("PUT = %d %s", r.code, r.body)
		}
		wantStored(t, r.body, extra, `{"parts":[{"color":"red","name":"a"},{"color":"pink","name":"p1"},{"name":"p2"}]}`)
	})
}

// assemblyJSON is an assembly named name with spec and the top-level
// field extra, unknown to the Go type.
func assemblyJSON(name, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"webhook.kctl.dev/v1","kind":"Assembly","metadata":{"name":%q},"extra":{"a":"top","n":1},"spec":%s}`, name, spec)
}

// wantStored checks that the object the API server answered, body, has
// exactly the bytes extra and spec there, and the label the function set.
func wantStored(t *testing.T, body []byte, extra, spec string) {
	t.Helper()
	var got struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Extra json.RawMessage `json:"extra"`
		Spec  json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the object stored: %v: %s", err, body)
	}
	if string(got.Spec) != spec {
		t.Errorf("spec stored:\n%s\nwant\n%s", got.Spec, spec)
	}
	if string(got.Extra) != extra {
		t.Errorf("extra stored: %s, want %s", got.Extra, extra)
	}
	if got.Metadata.Labels["defaulted"] != "true" {
		t.Errorf("labels stored: %v, want defaulted=true", got.Metadata.Labels)
	}
}

package kctltest

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/fieldlabel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/scheme"
)

// memResource is one resource the in-memory server serves: a k8s.io/api
// type's, a custom resource of a stored CRD, or a type kctl.Declare named.
type memResource struct {
	res kctl.Resource
	// typ is the Go type of a k8s.io/api resource, which objects are
	// normalized by and travel as in protobuf; nil for a custom resource.
	typ reflect.Type
	// status: the status subresource is served.
	status bool
	// fields are the field labels a list filters by.
	fields []string
	// schema is a custom resource's OpenAPI v3 schema (nil: none).
	schema map[string]any
}

// crdResource is the resource of CustomResourceDefinitions, which
// k8s.io/api lacks: served as JSON, without a Go type.
var crdResource = &memResource{
	res:    kctl.Resource{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Plural: "customresourcedefinitions"},
	status: true,
	fields: []string{"metadata.name"},
}

// unmodelledGroups are API groups the in-memory server does not serve,
// even to a type kctl.Declare names: a real server serves events.k8s.io's
// Events as a second view of core/v1's, which is not modelled.
var unmodelledGroups = map[string]bool{"events.k8s.io": true}

// builtins are the k8s.io/api resources, by group version, then plural:
// every kind of client-go's scheme with ObjectMeta, as kctl derives its
// Resource (internal/apitype), but those of unmodelledGroups.
var builtins = sync.OnceValue(func() map[string]map[string]*memResource {
	out := map[string]map[string]*memResource{}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || unmodelledGroups[gvk.Group] {
			continue
		}
		r, _, err := apitype.OfType(t)
		if err != nil || r.Kind != gvk.Kind || r.Group != gvk.Group || r.Version != gvk.Version {
			continue
		}
		gv := r.APIVersion()
		if out[gv] == nil {
			out[gv] = map[string]*memResource{}
		}
		fields := []string{"metadata.name", "metadata.namespace"}
		if !r.Namespaced {
			fields = fields[:1]
		}
		out[gv][r.Plural] = &memResource{res: kctl.Resource(r), typ: t, status: hasJSONField(t, "status"),
			fields: append(fields, fieldlabel.Of(r.Group, r.Kind)...)}
	}
	out["apiextensions.k8s.io/v1"] = map[string]*memResource{crdResource.res.Plural: crdResource}
	return out
})

// crdSpec is what the server reads of a stored CRD.
type crdSpec struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Plural   string `json:"plural"`
			Kind     string `json:"kind"`
			ListKind string `json:"listKind"`
			Singular string `json:"singular"`
		} `json:"names"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
			Schema struct {
				OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
			} `json:"schema"`
			Subresources struct {
				Status *struct{} `json:"status"`
			} `json:"subresources"`
			SelectableFields []struct {
				JSONPath string `json:"jsonPath"`
			} `json:"selectableFields"`
		} `json:"versions"`
	} `json:"spec"`
}

// customResources returns the resources of the stored CRDs, by group
// version then plural, and those kctl.Declare named that no CRD serves
// (with a status subresource). The caller holds s.fake.mu.
func (s *memServer) customResourcesLocked() map[string]map[string]*memResource {
	if s.crds != nil {
		return s.crds
	}
	out := map[string]map[string]*memResource{}
	add := func(r *memResource) {
		gv := r.res.APIVersion()
		if out[gv] == nil {
			out[gv] = map[string]*memResource{}
		}
		if _, ok := out[gv][r.res.Plural]; !ok {
			out[gv][r.res.Plural] = r
		}
	}
	crds := crdResource.res.Plural + "." + crdResource.res.Group
	keys := make([]fakeKey, 0)
	for k := range s.fake.objs {
		if k.resource == crds {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b fakeKey) int { return strings.Compare(a.Name, b.Name) })
	for _, k := range keys {
		var crd crdSpec
		if json.Unmarshal(s.fake.objs[k], &crd) != nil {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			r := &memResource{res: kctl.Resource{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind,
				Plural: crd.Spec.Names.Plural, Namespaced: crd.Spec.Scope != "Cluster"}, status: v.Subresources.Status != nil,
				schema: v.Schema.OpenAPIV3Schema}
			r.fields = []string{"metadata.name", "metadata.namespace"}
			for _, f := range v.SelectableFields {
				r.fields = append(r.fields, strings.TrimPrefix(f.JSONPath, "."))
			}
			add(r)
		}
	}
	for _, d := range apitype.Declared() {
		_, builtin := builtins()[d.APIVersion()][d.Plural]
		if !builtin && !unmodelledGroups[d.Group] {
			add(&memResource{res: kctl.Resource(d), status: true, fields: []string{"metadata.name", "metadata.namespace"}})
		}
	}
	s.crds = out
	return out
}

// resourceLocked finds the resource plural of group version gv. The caller
// holds s.fake.mu.
func (s *memServer) resourceLocked(gv, plural string) (*memResource, bool) {
	if r, ok := builtins()[gv][plural]; ok {
		return r, true
	}
	r, ok := s.customResourcesLocked()[gv][plural]
	return r, ok
}

// fakeOf is the store's view of r.
func (s *memServer) fakeOf(r *memResource) *fakeResource {
	f := newFakeResource(s.fake, r.res, r.typ)
	f.hasStatus = r.status
	f.schema = r.schema
	switch {
	case r.res.Group == "" && r.res.Kind == "Namespace":
		f.initial = func(doc map[string]any) {
			doc["spec"] = map[string]any{"finalizers": []any{"kubernetes"}}
			doc["status"] = map[string]any{"phase": "Active"}
		}
	case r == crdResource:
		f.initial = establish
	}
	return &f
}

// establish sets a new CRD's status as the API server's controllers do:
// its names accepted, and Established.
func establish(doc map[string]any) {
	spec, _ := doc["spec"].(map[string]any)
	names := spec["names"]
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	cond := func(typ, reason string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": "", "lastTransitionTime": now}
	}
	doc["status"] = map[string]any{
		"acceptedNames":  names,
		"conditions":     []any{cond("NamesAccepted", "NoConflicts"), cond("Established", "InitialNamesAccepted")},
		"storedVersions": []any{},
	}
}

// discoveryDoc is the APIResourceList of group version gv (nil: not
// served). The caller holds s.fake.mu.
func (s *memServer) discoveryDocLocked(gv string) *metav1.APIResourceList {
	rs := map[string]*memResource{}
	for p, r := range s.customResourcesLocked()[gv] {
		rs[p] = r
	}
	for p, r := range builtins()[gv] {
		rs[p] = r
	}
	if len(rs) == 0 {
		return nil
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	for _, p := range slices.Sorted(maps.Keys(rs)) {
		r := rs[p]
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: p, Namespaced: r.res.Namespaced,
			Kind: r.res.Kind, Verbs: verbs, SingularName: strings.ToLower(r.res.Kind)})
		if r.status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: p + "/status", Namespaced: r.res.Namespaced,
				Kind: r.res.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
		switch subresources[resourceName(r)] {
		case "scale":
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: p + "/scale", Namespaced: r.res.Namespaced,
				Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}})
		case "eviction":
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: p + "/eviction", Namespaced: r.res.Namespaced,
				Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}})
		}
	}
	return list
}

// groupsLocked is the APIGroupList of /apis. The caller holds s.fake.mu.
func (s *memServer) groupsLocked() *metav1.APIGroupList {
	versions := map[string][]string{}
	for _, m := range []map[string]map[string]*memResource{builtins(), s.customResourcesLocked()} {
		for gv := range m {
			g, v, ok := strings.Cut(gv, "/")
			if ok && !slices.Contains(versions[g], v) {
				versions[g] = append(versions[g], v)
			}
		}
	}
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, g := range slices.Sorted(maps.Keys(versions)) {
		group := metav1.APIGroup{Name: g}
		vs := versions[g]
		slices.SortFunc(vs, func(a, b string) int { return version.CompareKubeAwareVersionStrings(b, a) }) // the preferred first
		for _, v := range vs {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		list.Groups = append(list.Groups, group)
	}
	return list
}

// prune drops the fields of v that schema, a structural OpenAPI v3
// schema, does not declare, as the API server prunes a custom resource's
// (unless x-kubernetes-preserve-unknown-fields). At the root, apiVersion,
// kind and metadata stay.
func prune(v any, schema map[string]any, root bool) {
	if preserve, _ := schema["x-kubernetes-preserve-unknown-fields"].(bool); preserve && schema["properties"] == nil {
		return
	}
	switch c := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		additional, _ := schema["additionalProperties"].(map[string]any)
		preserve, _ := schema["x-kubernetes-preserve-unknown-fields"].(bool)
		for k, e := range c {
			if root && (k == "apiVersion" || k == "kind" || k == "metadata") {
				continue
			}
			sub, declared := props[k].(map[string]any)
			switch {
			case declared:
				prune(e, sub, false)
			case additional != nil:
				prune(e, additional, false)
			case !preserve && (props != nil || schema["type"] == "object"):
				delete(c, k)
			}
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for _, e := range c {
			if items != nil {
				prune(e, items, false)
			}
		}
	}
}

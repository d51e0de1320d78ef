package kctltest

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// currentLocked returns the stored object key as a map. rv, unless "", must
// be its resourceVersion; needRV makes "" an error.
func (f *fakeResource) currentLocked(key fakeKey, rv string, needRV bool) (map[string]any, error) {
	b, ok := f.store.objs[key]
	if !ok {
		return nil, f.notFound(key.Name)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	stored, _ := metadata(doc)["resourceVersion"].(string)
	switch {
	case rv == "" && needRV:
		return nil, apierrors.NewInvalid(f.groupKind(), key.Name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), "",
			"must be specified for an update")})
	case rv != "" && rv != stored:
		return nil, apierrors.NewConflict(f.groupResource(), key.Name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return doc, nil
}

// merge returns what a write of next over old stores: with status, old with
// next's status; else next with old's status (if modelled) and old's
// server-owned metadata, and generation bumped if the rest changed.
func (f *fakeResource) merge(old, next map[string]any, status bool) map[string]any {
	if status {
		out := clone(old)
		out["status"] = next["status"]
		return out
	}
	out := clone(next)
	if f.hasStatus {
		out["status"] = old["status"]
	}
	meta := metadata(out)
	oldMeta := metadata(old)
	for _, k := range []string{"uid", "creationTimestamp", "generation", "deletionTimestamp", "namespace", "name", "resourceVersion"} {
		meta[k] = oldMeta[k]
	}
	if !reflect.DeepEqual(spec(old), spec(out)) {
		gen, _ := oldMeta["generation"].(float64)
		meta["generation"] = gen + 1
	}
	return out
}

// storeLocked stores doc under key (or deletes it, if it is being deleted
// and has no finalizer left) with a new resourceVersion, unless it is old
// unchanged (the API server writes nothing then), and returns the result.
// old is nil for a new object. The fields that changed become
// manager's alone (see leaves); Apply records what it shares itself.
//
// Objects are stored normal (see normal), so old, read back from the
// store, is; doc is made so here.
func (f *fakeResource) storeLocked(key fakeKey, old, doc map[string]any, manager string) ([]byte, error) {
	doc = f.normal(doc)
	f.own(key, old, doc, manager)
	meta := metadata(doc)
	doc["apiVersion"] = f.res.APIVersion()
	doc["kind"] = f.res.Kind
	changed := old == nil || !sameButRV(old, doc)
	if changed {
		f.store.rv++
		meta["resourceVersion"] = strconv.FormatInt(f.store.rv, 10)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	fin, _ := meta["finalizers"].([]any)
	if f.res.Group == "" && f.res.Kind == "Namespace" {
		spec, _ := doc["spec"].(map[string]any)
		specFin, _ := spec["finalizers"].([]any)
		fin = append(fin, specFin...) // a namespace's own, which its controller removes
	}
	if meta["deletionTimestamp"] != nil && len(fin) == 0 {
		f.store.objs[key] = b // as it goes: what a watch's DELETED event shows
		f.forgetLocked(key)
		return b, nil
	}
	prev := f.store.objs[key]
	f.store.objs[key] = b
	switch {
	case old == nil:
		f.store.record(key, "ADDED", b, nil)
	case changed:
		f.store.record(key, "MODIFIED", b, prev)
	}
	return b, nil
}

// normal is doc as the Go type holds it: fields it lacks dropped, as the API
// server drops those its schema lacks, and zero values as its JSON tags
// say. Without a Go type, it is doc without its null values.
func (f *fakeResource) normal(doc map[string]any) map[string]any {
	if f.typ == nil {
		out := dropNulls(clone(doc)).(map[string]any)
		if f.schema != nil {
			prune(out, f.schema, true)
		}
		return out
	}
	b, _ := json.Marshal(doc) // decoded JSON: cannot fail
	obj := reflect.New(f.typ).Interface()
	if json.Unmarshal(b, obj) != nil {
		return doc
	}
	out, err := toMap(obj)
	if err != nil {
		return doc
	}
	return out
}

// sameButRV tells whether a and b, both normal, are the same object but
// for resourceVersion.
func sameButRV(a, b map[string]any) bool {
	strip := func(doc map[string]any) map[string]any {
		out := maps.Clone(doc)
		meta := maps.Clone(metadata(out))
		delete(meta, "resourceVersion")
		out["metadata"] = meta
		return out
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

func (f *FakeClient[T]) decode(b []byte) (*T, error) {
	obj := new(T)
	return obj, json.Unmarshal(b, obj)
}

// into decodes the stored object b into obj.
func into[T any](b []byte, obj *T) error {
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	*obj = out
	return nil
}

func (f *fakeResource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: f.res.Group, Resource: f.res.Plural}
}

func (f *fakeResource) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: f.res.Group, Kind: f.res.Kind}
}

func (f *fakeResource) notFound(name string) error {
	return apierrors.NewNotFound(f.groupResource(), name)
}

func toMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	return doc, json.Unmarshal(b, &doc)
}

// metadata returns doc's metadata map, adding an empty one if it has none.
func metadata(doc map[string]any) map[string]any {
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	return meta
}

// spec is everything generation tracks: all but metadata and status.
func spec(doc map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			out[k] = v
		}
	}
	return out
}

// clone deep-copies decoded JSON (nil stays nil).
func clone(doc map[string]any) map[string]any {
	out, _ := cloneValue(doc).(map[string]any)
	return out
}

// mergePatch applies an RFC 7386 merge patch to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

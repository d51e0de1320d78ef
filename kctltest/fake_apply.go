package kctltest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/kctl-dev/kctl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apply is server-side apply by opts.FieldManager of the configuration
// data, to the object namespace/name, or to its status with
// opts.Subresource "status": see FakeClient for what is modelled. A field
// is owned by the managers that set it to its value (see own); an Apply
// that would change a field another manager owns fails with the API
// server's Conflict unless opts.Force, which makes the field its alone.
//
// As on the API server, a manager's applies to the object and to its
// status are two owners (see applier): each removes only the fields that
// it set and no longer sets. An apply to the status changes the status
// alone, and finds no object to create.
func (f *fakeResource) apply(namespace, name string, data []byte, opts kctl.PatchOptions) ([]byte, error) {
	manager := opts.FieldManager
	status := opts.Subresource == "status" && f.hasStatus
	switch {
	case manager == "":
		return nil, fmt.Errorf("kctl: apply %s %s/%s: server-side apply needs PatchOptions.FieldManager, e.g. the controller's name",
			f.res.Kind, namespace, name)
	case opts.Subresource != "" && !status:
		return nil, fmt.Errorf("kctltest: FakeClient[%s] does not model server-side apply of the %s subresource: test it with Start",
			f.res.Kind, opts.Subresource)
	}
	owner := applier(manager, opts.Subresource)
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, apierrors.NewBadRequest("the applied configuration is not a JSON object: " + err.Error())
	}
	cfg = dropNulls(cfg).(map[string]any)
	meta := metadata(cfg)
	rv, _ := meta["resourceVersion"].(string)
	for _, k := range serverFields {
		delete(meta, k)
	}
	delete(cfg, "apiVersion")
	delete(cfg, "kind")
	if f.hasStatus && !status {
		delete(cfg, "status") // the status subresource's
	}
	meta["name"] = name
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if status {
		cfg = statusOnly(cfg)
	}
	key := f.key(namespace, name)
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	_, exists := f.store.objs[key]
	switch {
	case !exists && status:
		return nil, f.notFound(name)
	case !exists:
		out, err := f.createLocked(clone(cfg), owner)
		if err != nil {
			return nil, err
		}
		f.remember(key, owner, cfg)
		return out, nil
	}
	old, err := f.currentLocked(key, rv, false)
	if err != nil {
		return nil, err
	}
	want := appliedLeaves(cfg)
	have := leaves(old)
	owners := f.store.owners[key]
	var conflicts []string
	for path, v := range want {
		hv, ok := have[path]
		if !ok || reflect.DeepEqual(hv, v) {
			continue
		}
		for o := range owners[path] {
			if o != owner {
				conflicts = append(conflicts, fmt.Sprintf("conflict with %s: %s", conflictWith(o), dotted(path)))
			}
		}
	}
	if len(conflicts) > 0 && !opts.Force {
		slices.Sort(conflicts)
		noun := "conflicts"
		if len(conflicts) == 1 {
			noun = "conflict"
		}
		return nil, apierrors.NewConflict(f.groupResource(), name,
			fmt.Errorf("Apply failed with %d %s: %s", len(conflicts), noun, strings.Join(conflicts, ", ")))
	}
	next := clone(old)
	for path := range appliedLeaves(f.store.applied[key][owner]) {
		if _, still := want[path]; still {
			continue
		}
		delete(owners[path], owner)
		if len(owners[path]) == 0 {
			removePath(next, path)
		}
	}
	next = f.normal(mergePatch(next, clone(cfg)).(map[string]any))
	out, err := f.storeLocked(key, old, f.merge(old, next, status), owner)
	if err != nil {
		return nil, err
	}
	f.remember(key, owner, cfg)
	return out, nil
}

// statusOnly is what an apply to the status subresource writes of the
// configuration cfg: its status, if it sets one. The API server ignores
// the rest there.
func statusOnly(cfg map[string]any) map[string]any {
	out := map[string]any{}
	if st, ok := cfg["status"]; ok {
		out["status"] = st
	}
	return out
}

// applier is the owner of the fields that manager applies, to the object
// (subresource "") or to one of its subresources: the API server keeps the
// two apart in managedFields.
func applier(manager, subresource string) string {
	if subresource == "" {
		return manager
	}
	return manager + "\x00" + subresource
}

// conflictWith names an owner of a field as the API server's conflict
// does: "m" or "m" with subresource "status". "" is the writes not made
// by Apply.
func conflictWith(owner string) string {
	manager, subresource, _ := strings.Cut(owner, "\x00")
	if manager == "" {
		manager = "kctl (Create, Update or Patch)"
	}
	if subresource == "" {
		return strconv.Quote(manager)
	}
	return fmt.Sprintf("%q with subresource %q", manager, subresource)
}

// appliedLeaves is the fields a configuration sets (see leaves): none for
// an empty one, such as an apply to a status that sets no status.
func appliedLeaves(cfg map[string]any) map[string]any {
	out := leaves(cfg)
	delete(out, "") // an empty configuration's root
	return out
}

// remember records cfg as what manager last applied to key, and makes
// manager an owner of each field cfg sets.
func (f *fakeResource) remember(key fakeKey, manager string, cfg map[string]any) {
	if f.store.applied[key] == nil {
		f.store.applied[key] = map[string]map[string]any{}
	}
	f.store.applied[key][manager] = cfg
	if _, ok := f.store.objs[key]; !ok {
		return // gone
	}
	if f.store.owners[key] == nil {
		f.store.owners[key] = map[string]map[string]bool{}
	}
	for path := range appliedLeaves(cfg) {
		if f.store.owners[key][path] == nil {
			f.store.owners[key][path] = map[string]bool{}
		}
		f.store.owners[key][path][manager] = true
	}
}

// own makes manager the only owner of each field that differs between old
// (nil for a new object) and next, and forgets the owners of fields next
// lacks.
func (f *fakeResource) own(key fakeKey, old, next map[string]any, manager string) {
	if f.store.owners[key] == nil {
		f.store.owners[key] = map[string]map[string]bool{}
	}
	owners := f.store.owners[key]
	was := leaves(old)
	is := leaves(next)
	for path, v := range is {
		if wv, ok := was[path]; !ok || !reflect.DeepEqual(wv, v) {
			owners[path] = map[string]bool{manager: true}
		}
	}
	for path := range owners {
		if _, ok := is[path]; !ok {
			delete(owners, path)
		}
	}
}

// serverFields are the metadata fields the server sets, which no manager owns.
var serverFields = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"managedFields", "selfLink", "deletionGracePeriodSeconds"}

// leaves flattens doc into its fields, each a path of keys joined with
// "\x00", to its value: a list, or a value that is not an object, is one
// field; so is an empty object. Server-owned fields (apiVersion, kind, the
// metadata in serverFields, name and namespace) are left out.
func leaves(doc map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix []string, v any)
	walk = func(prefix []string, v any) {
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			out[strings.Join(prefix, "\x00")] = v
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			walk(append(slices.Clone(prefix), k), m[k])
		}
	}
	for k, v := range doc {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		if k != "metadata" {
			walk([]string{k}, v)
			continue
		}
		meta, _ := v.(map[string]any)
		for mk, mv := range meta {
			if !slices.Contains(serverFields, mk) && mk != "name" && mk != "namespace" {
				walk([]string{k, mk}, mv)
			}
		}
	}
	return out
}

// dotted is a leaves path as the API server writes it, ".spec.size".
func dotted(path string) string {
	return "." + strings.ReplaceAll(path, "\x00", ".")
}

// removePath deletes the field path (see leaves) from doc, and the objects
// that this leaves empty.
func removePath(doc map[string]any, path string) {
	keys := strings.Split(path, "\x00")
	m := doc
	var chain []map[string]any
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		chain = append(chain, m)
		m = next
	}
	delete(m, keys[len(keys)-1])
	for i := len(chain) - 1; i >= 0 && len(m) == 0; i-- {
		delete(chain[i], keys[i])
		m = chain[i]
	}
}

// dropNulls removes the null values of an applied configuration (a typed
// struct sends "creationTimestamp": null), which the API server ignores.
func dropNulls(v any) any {
	switch c := v.(type) {
	case map[string]any:
		for k, e := range c {
			if e == nil {
				delete(c, k)
				continue
			}
			c[k] = dropNulls(e)
		}
	case []any:
		for i, e := range c {
			c[i] = dropNulls(e)
		}
	}
	return v
}

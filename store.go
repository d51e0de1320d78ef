package kctl

// The informer's store: its objects by key, and the indexes
// (internal/index) a cached List is answered from. list_watch.go fills
// it, informer.go reads it; handler.go hands its changes to handlers.

import (
	"iter"

	"github.com/kctl-dev/kctl/internal/index"
	"github.com/kctl-dev/kctl/internal/undecodable"
	"k8s.io/apimachinery/pkg/labels"
)

// store is an informer's objects with their indexes. It has no lock: the
// Informer, its only writer, guards it, so it is tested without goroutines.
// Stored objects are never mutated: a change replaces the pointer. P is
// *T, for an Object[T]: store is compiled once for every T (see typeOps).
type store[P any] struct {
	// objects maps namespace ("" if cluster-scoped) and name to the object.
	// Empty inner maps are removed: the keys are the namespace index.
	objects map[string]map[string]entry[P]
	// indexes are the user's, by name, and those of label keys.
	indexes *index.Set[objKey, P]
	// bad holds the objects that exist on the server but whose last state
	// does not decode into T (internal/undecodable). objects keeps the last
	// good copy of such an object, if it ever decoded: readers and handlers
	// see that state until it decodes again (put) or is deleted (remove).
	bad   *undecodable.Set[objKey]
	count int
	bytes int64  // the sum of the sizes measured so far (by Informer.Stats)
	gen   uint32 // the current replace; put marks each entry with it
}

type entry[P any] struct {
	obj       P
	size, gen uint32 // size: encoded bytes, 0 until measured
}

type objKey struct{ namespace, name string }

func (k objKey) String() string { return nsKey(k.namespace, k.name) }

func newStore[P any]() *store[P] {
	labels := func(obj P) map[string]string {
		return metaOf(obj).GetLabels()
	}
	key := func(namespace, name string) objKey {
		return objKey{namespace, name}
	}
	split := func(k objKey) (namespace, name string) {
		return k.namespace, k.name
	}
	return &store[P]{
		objects: map[string]map[string]entry[P]{},
		indexes: index.NewSet(labels, key, split),
		bad:     undecodable.New[objKey](),
	}
}

func (s *store[P]) get(namespace, name string) (P, bool) {
	e, ok := s.objects[namespace][name]
	return e.obj, ok
}

// has reports whether an object is stored under k.
func (s *store[P]) has(k objKey) bool {
	_, ok := s.objects[k.namespace][k.name]
	return ok
}

// put stores obj unless the object stored under its key has the same
// resourceVersion, and says what changed: Added, or Updated from old.
func (s *store[P]) put(obj P) (t EventType, old P, changed bool) {
	m := metaOf(obj)
	k := objKey{m.GetNamespace(), m.GetName()}
	if s.objects[k.namespace] == nil {
		s.objects[k.namespace] = map[string]entry[P]{}
	}
	s.bad.Clear(k) // decodes again
	prev, had := s.objects[k.namespace][k.name]
	e := prev
	changed = !had || metaOf(prev.obj).GetResourceVersion() != m.GetResourceVersion()
	if changed {
		s.untrack(k, prev, had)
		e = entry[P]{obj: obj}
		s.indexes.Add(k, obj)
		s.count++
	}
	e.gen = s.gen
	s.objects[k.namespace][k.name] = e
	if had {
		return Updated, prev.obj, changed
	}
	var none P
	return Added, none, changed
}

// remove deletes namespace/name and reports whether it was stored.
func (s *store[P]) remove(namespace, name string) bool {
	s.bad.Clear(objKey{namespace, name})
	e, had := s.objects[namespace][name]
	if had {
		delete(s.objects[namespace], name)
		if len(s.objects[namespace]) == 0 {
			delete(s.objects, namespace)
		}
		s.untrack(objKey{namespace, name}, e, true)
	}
	return had
}

// untrack takes e, if had, out of the count, the bytes and the indexes.
func (s *store[P]) untrack(k objKey, e entry[P], had bool) {
	if had {
		s.count--
		s.bytes -= int64(e.size)
		s.indexes.Remove(k, e.obj)
	}
}

// replace makes the objects of namespace ("" means all) exactly a list's
// result: objs, which decoded, and bad, which did not. It reports each
// difference to changed: Added, Updated (with old) or Deleted (with the last
// stored state). An object whose resourceVersion is unchanged is kept and not
// reported. An object in bad exists: it is marked (s.bad) and keeps its
// last good copy, never taken for deleted. If one in bad has no key (not
// even its metadata decoded), no object is deleted: any might be that one.
func (s *store[P]) replace(namespace string, objs []P, bad []*decodeError, changed func(t EventType, obj, old P)) {
	ns := func(obj P) string { return metaOf(obj).GetNamespace() }
	index.Presize(s.objects, objs, ns) // one allocation for the first list
	s.gen++
	for _, obj := range objs {
		if t, old, ok := s.put(obj); ok {
			changed(t, obj, old)
		}
	}
	key := func(b *decodeError) (objKey, bool) {
		return objKey{b.Namespace, b.Name}, b.Name != ""
	}
	inScope := func(k objKey) bool {
		return namespace == "" || k.namespace == namespace
	}
	// internal/undecodable marks each of bad, forgets the unlisted in scope.
	if !undecodable.Relist(s.bad, bad, key, inScope) {
		return // keep every unlisted object: any might be the one without a key
	}
	swept := s.objects
	if namespace != "" {
		swept = map[string]map[string]entry[P]{namespace: s.objects[namespace]}
	}
	var none P
	for ns, inner := range swept {
		for name, e := range inner {
			// listed: put by this replace, or marked undecodable by it
			listed := e.gen == s.gen || s.bad.Has(objKey{ns, name})
			if !listed { // deleted
				s.remove(ns, name)
				changed(Deleted, e.obj, none)
			}
		}
	}
}

// list returns the objects in namespace ("" means all) whose labels match sel
// (nil matches all) and that meet every field requirement, walking the
// fewest objects it can (internal/index plans and walks it). The first such
// List of a label key returns missing = that key instead, for the caller
// to build the index under the write lock (labelIndex) and ask again.
func (s *store[P]) list(namespace string, sel labels.Selector, fields []index.Field[objKey, P]) (out []P, missing string) {
	plan, missing := s.indexes.Plan(namespace, sel, fields)
	if missing != "" {
		return nil, missing
	}
	obj := func(e entry[P]) P { return e.obj }
	return index.List(&plan, s.objects, obj), ""
}

// labelIndex builds the index of label key that list asked for.
func (s *store[P]) labelIndex(key string) {
	s.indexes.AddLabel(key, s.each())
}

// each yields every stored object with its key.
func (s *store[P]) each() iter.Seq2[objKey, P] {
	return func(yield func(objKey, P) bool) {
		for ns, inner := range s.objects {
			for name, e := range inner {
				if !yield(objKey{ns, name}, e.obj) {
					return
				}
			}
		}
	}
}

// all returns every stored object.
func (s *store[P]) all() []P {
	out, _ := s.list("", nil, nil)
	return out
}

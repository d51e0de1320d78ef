package kctl

// The informer's store: its objects by key, and the indexes
// (internal/index) a cached List is answered from. list_watch.go fills
// it, informer.go reads it; handler.go hands its changes to handlers.

import (
	"iter"

	"github.com/kctl-dev/kctl/internal/index"
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
	// bad holds the objects that exist on the server (as the last list or
	// watch event of each says) but whose last state does not decode into
	// T, each with its error. objects keeps the last good copy of such an
	// object, if it ever decoded: readers and handlers see that state until
	// the object decodes again (put) or is deleted (remove).
	bad   map[objKey]error
	count int
	bytes int64  // the sum of the sizes measured so far (by Informer.Stats)
	gen   uint32 // the current replace; put marks each entry with it
}

type entry[P any] struct {
	obj       P
	size, gen uint32 // size: encoded bytes, 0 until measured
}

type objKey struct{ namespace, name string }

func newStore[P any]() *store[P] {
	labels := func(obj P) map[string]string {
		return metaOf(obj).GetLabels()
	}
	return &store[P]{
		objects: map[string]map[string]entry[P]{},
		indexes: index.NewSet[objKey](labels),
		bad:     map[objKey]error{},
	}
}

func (s *store[P]) get(namespace, name string) (P, bool) {
	e, ok := s.objects[namespace][name]
	return e.obj, ok
}

// put stores obj unless the object stored under its key has the same
// resourceVersion, and says what changed: Added, or Updated from old.
func (s *store[P]) put(obj P) (t EventType, old P, changed bool) {
	m := metaOf(obj)
	k := objKey{m.GetNamespace(), m.GetName()}
	if s.objects[k.namespace] == nil {
		s.objects[k.namespace] = map[string]entry[P]{}
	}
	delete(s.bad, k) // decodes again
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
	delete(s.bad, objKey{namespace, name})
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

// markBad records that the object under k exists but its state does not
// decode (err), keeping its last good copy, if any; it reports whether the
// object was decodable before.
func (s *store[P]) markBad(k objKey, err error) (first bool) {
	_, was := s.bad[k]
	s.bad[k] = err
	if e, ok := s.objects[k.namespace][k.name]; ok {
		e.gen = s.gen // listed, for replace
		s.objects[k.namespace][k.name] = e
	}
	return !was
}

// replace makes the objects of namespace ("" means all) exactly a list's
// result: objs, which decoded, and bad, which did not. It reports each
// difference to changed: Added, Updated (with old) or Deleted (with the last
// stored state). An object whose resourceVersion is unchanged is kept and not
// reported. An object in bad exists: it is marked (markBad) and keeps its
// last good copy, never taken for deleted. If one in bad has no key (not
// even its metadata decoded), no object is deleted: any might be that one.
func (s *store[P]) replace(namespace string, objs []P, bad []*decodeError, changed func(t EventType, obj, old P)) {
	sizes := map[string]int{}
	for _, obj := range objs {
		sizes[metaOf(obj).GetNamespace()]++
	}
	for ns, n := range sizes {
		if s.objects[ns] == nil {
			s.objects[ns] = make(map[string]entry[P], n) // one allocation for the first list
		}
	}
	s.gen++
	for _, obj := range objs {
		if t, old, ok := s.put(obj); ok {
			changed(t, obj, old)
		}
	}
	listedBad := make(map[objKey]bool, len(bad))
	keyless := false
	for _, b := range bad {
		k := objKey{b.Namespace, b.Name}
		listedBad[k] = true
		keyless = keyless || b.Name == ""
		if b.Name != "" {
			s.markBad(k, b)
		}
	}
	if keyless {
		return // keep every unlisted object: any might be the one without a key
	}
	for k := range s.bad {
		if (namespace == "" || k.namespace == namespace) && !listedBad[k] {
			delete(s.bad, k) // gone while it did not decode; a stored copy is swept below
		}
	}
	swept := s.objects
	if namespace != "" {
		swept = map[string]map[string]entry[P]{namespace: s.objects[namespace]}
	}
	var none P
	for ns, inner := range swept {
		for name, e := range inner {
			if e.gen != s.gen { // not listed: deleted
				s.remove(ns, name)
				changed(Deleted, e.obj, none)
			}
		}
	}
}

// list returns the objects in namespace ("" means all) whose labels match sel
// (nil matches all) and that meet every field requirement, walking the
// fewest objects it can (internal/index plans the walk). The first such
// List of a label key returns missing = that key instead, for the caller
// to build the index under the write lock (labelIndex) and ask again.
func (s *store[P]) list(namespace string, sel labels.Selector, fields []index.Field[objKey, P]) (out []P, missing string) {
	if sel != nil && sel.Empty() {
		sel = nil
	}
	plan, missing := s.indexes.Plan(namespace, sel, fields)
	if plan.None || missing != "" {
		return nil, missing
	}
	match := func(k objKey, e entry[P]) {
		if sel != nil && !sel.Matches(labels.Set(metaOf(e.obj).GetLabels())) {
			return
		}
		for _, f := range fields {
			if !fieldMatches(f, k) {
				return
			}
		}
		out = append(out, e.obj)
	}
	namespace = plan.Namespace
	switch {
	case plan.Name != "":
		for ns, inner := range s.objects {
			if e, ok := inner[plan.Name]; ok && (namespace == "" || ns == namespace) {
				match(objKey{ns, plan.Name}, e)
			}
		}
	case plan.Index != nil:
		for _, v := range plan.Values {
			for k := range plan.Index.Keys(v) {
				if namespace == "" || k.namespace == namespace {
					match(k, s.objects[k.namespace][k.name])
				}
			}
		}
	case namespace != "":
		out = make([]P, 0, len(s.objects[namespace]))
		for name, e := range s.objects[namespace] {
			match(objKey{namespace, name}, e)
		}
	default:
		out = make([]P, 0, s.count)
		for ns, inner := range s.objects {
			for name, e := range inner {
				match(objKey{ns, name}, e)
			}
		}
	}
	return out, ""
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

// fieldMatches reports whether the object stored under k meets f.
func fieldMatches[P any](f index.Field[objKey, P], k objKey) bool {
	var in bool
	switch {
	case f.Index != nil:
		in = f.Index.Has(f.Value, k)
	case f.Field == "metadata.name":
		in = k.name == f.Value
	default:
		in = k.namespace == f.Value
	}
	return in == f.Equal
}

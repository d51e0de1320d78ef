package kctl

// The informer's store: its objects and indexes, and the field selectors
// a cached List can answer. list_watch.go fills it, informer.go reads it;
// handler.go hands its changes to handlers.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kctl-dev/kctl/internal/fieldlabel"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// store is an informer's objects with their indexes. It has no lock: the
// Informer, its only writer, guards it, so it is tested without goroutines.
// Stored objects are never mutated: a change replaces the pointer. P is
// *T, for an Object[T]: store is compiled once for every T (see typeOps).
type store[P any] struct {
	// objects maps namespace ("" if cluster-scoped) and name to the object.
	// Empty inner maps are removed: the keys are the namespace index.
	objects map[string]map[string]entry[P]
	indexes map[string]*index[P] // the user's, by name
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

// index files every stored object's key under each value fn returns for it.
type index[P any] struct {
	fn     func(obj P) []string // the same values for the same object
	values map[string]map[objKey]struct{}
}

func newStore[P any]() *store[P] {
	return &store[P]{objects: map[string]map[string]entry[P]{}, indexes: map[string]*index[P]{}, bad: map[objKey]error{}}
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
		for _, ix := range s.indexes {
			ix.add(k, obj)
		}
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
		for _, ix := range s.indexes {
			ix.remove(k, e.obj)
		}
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
// (nil matches all) and that meet every field requirement. It walks the
// fewest objects it can: a name required to equal a value is looked up; else
// a requirement that a label (key=value, key in (...)) or an indexed field
// equal a value is answered from the narrowest index, so a List costs what it
// returns, not the size of the namespace. The first such List of a label key
// returns missing = that key instead, for the caller to build the index under
// the write lock (labelIndex) and ask again, until nothing is missing.
func (s *store[P]) list(namespace string, sel labels.Selector, fields []fieldReq[P]) (out []P, missing string) {
	if sel != nil && sel.Empty() {
		sel = nil
	}
	name := ""
	for _, f := range fields {
		switch {
		case !f.equal || f.ix != nil:
		case f.field == "metadata.name":
			name = f.value
		case namespace != "" && namespace != f.value:
			return nil, "" // two namespaces: nothing is in both
		default:
			namespace = f.value
		}
	}
	match := func(k objKey, e entry[P]) {
		if sel != nil && !sel.Matches(labels.Set(metaOf(e.obj).GetLabels())) {
			return
		}
		for _, f := range fields {
			if !f.matches(k) {
				return
			}
		}
		out = append(out, e.obj)
	}
	ix, values, missing := s.labelIndexFor(sel)
	if missing != "" {
		return nil, missing
	}
	for _, f := range fields {
		if f.ix != nil && f.equal && (ix == nil || len(f.ix.values[f.value]) < indexed(ix, values)) {
			ix = f.ix
			values = []string{f.value}
		}
	}
	switch {
	case name != "":
		for ns, inner := range s.objects {
			if e, ok := inner[name]; ok && (namespace == "" || ns == namespace) {
				match(objKey{ns, name}, e)
			}
		}
	case ix != nil:
		for _, v := range values {
			for k := range ix.values[v] {
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

// indexed is the number of keys ix files under values.
func indexed[P any](ix *index[P], values []string) int {
	n := 0
	for _, v := range values {
		n += len(ix.values[v])
	}
	return n
}

// maxIndexes bounds the label indexes List builds by itself (with the
// user's): past it, a List by a new label key tests every object.
const maxIndexes = 16

// labelIndexFor returns the label index that answers sel with the fewest
// objects, and the values to look up in it: sel's requirements key=value,
// key==value and key in (values) can be. If such a key has no index yet (and
// there is room for one), it returns the key as missing instead.
func (s *store[P]) labelIndexFor(sel labels.Selector) (best *index[P], values []string, missing string) {
	if sel == nil {
		return nil, nil, ""
	}
	reqs, _ := sel.Requirements()
	fewest := 0
	for _, r := range reqs {
		if op := r.Operator(); op != selection.Equals && op != selection.DoubleEquals && op != selection.In {
			continue
		}
		ix := s.indexes[labelIndexName(r.Key())]
		if ix == nil && len(s.indexes) < maxIndexes {
			return nil, nil, r.Key()
		}
		if ix == nil {
			continue
		}
		vals := r.Values().UnsortedList()
		if n := indexed(ix, vals); best == nil || n < fewest {
			best = ix
			values = vals
			fewest = n
		}
	}
	return best, values, ""
}

// labelIndexName names the index of label key among the user's indexes; the
// leading NUL keeps it apart from any name a user picks.
func labelIndexName(key string) string { return "\x00label " + key }

// labelIndex builds the index of label key that list asked for.
func (s *store[P]) labelIndex(key string) {
	if s.indexes[labelIndexName(key)] == nil {
		_ = s.addIndex(labelIndexName(key), func(obj P) []string {
			if v, ok := metaOf(obj).GetLabels()[key]; ok {
				return []string{v}
			}
			return nil
		})
	}
}

// all returns every stored object.
func (s *store[P]) all() []P {
	out, _ := s.list("", nil, nil)
	return out
}

// setSize records obj's size if obj is still stored and unmeasured.
func (s *store[P]) setSize(obj P, size int) {
	m := metaOf(obj)
	if e, ok := s.objects[m.GetNamespace()][m.GetName()]; ok && any(e.obj) == any(obj) && e.size == 0 {
		e.size = uint32(size)
		s.bytes += int64(size)
		s.objects[m.GetNamespace()][m.GetName()] = e
	}
}

func (s *store[P]) addIndex(name string, fn func(obj P) []string) error {
	if _, ok := s.indexes[name]; ok || fn == nil {
		return fmt.Errorf("kctl: index %q is already defined or has no function: give each index one unique name", name)
	}
	ix := &index[P]{fn: fn, values: map[string]map[objKey]struct{}{}}
	for ns, inner := range s.objects {
		for name, e := range inner {
			ix.add(objKey{ns, name}, e.obj)
		}
	}
	s.indexes[name] = ix
	return nil
}

func (s *store[P]) byIndex(name, value string) []P {
	if s.indexes[name] == nil {
		return nil
	}
	keys := s.indexes[name].values[value]
	out := make([]P, 0, len(keys))
	for k := range keys {
		out = append(out, s.objects[k.namespace][k.name].obj)
	}
	return out
}

func (ix *index[P]) add(k objKey, obj P) {
	for _, v := range ix.fn(obj) {
		if ix.values[v] == nil {
			ix.values[v] = map[objKey]struct{}{}
		}
		ix.values[v][k] = struct{}{}
	}
}

func (ix *index[P]) remove(k objKey, obj P) {
	for _, v := range ix.fn(obj) {
		delete(ix.values[v], k)
		if len(ix.values[v]) == 0 {
			delete(ix.values, v)
		}
	}
}

// fieldReq is one requirement of a field selector that the cache answers.
// It is decided by the object's key alone.
type fieldReq[P any] struct {
	field, value string
	equal        bool      // = or ==; false for !=
	ix           *index[P] // the index named field; nil for metadata.name and metadata.namespace
}

// matches reports whether the object stored under k meets the requirement.
func (f fieldReq[P]) matches(k objKey) bool {
	var in bool
	switch {
	case f.ix != nil:
		_, in = f.ix.values[f.value][k]
	case f.field == "metadata.name":
		in = k.name == f.value
	default:
		in = k.namespace == f.value
	}
	return in == f.equal
}

// fieldReqs parses selector for a List of s, whose objects were all listed
// with the field selector scope (whose requirements all objects meet: left
// out). A field not metadata.name, metadata.namespace nor indexed goes in
// unknown. Call it with s's lock held: the requirements point at s's indexes.
func (s *store[P]) fieldReqs(selector, scope string) (reqs []fieldReq[P], unknown []string, err error) {
	if strings.TrimSpace(selector) == "" {
		return nil, nil, nil
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, nil, fmt.Errorf("kctl: bad field selector %q: %w", selector, err)
	}
	held := scopeReqs(scope)
	for _, r := range sel.Requirements() {
		if containsReq(held, r) {
			continue
		}
		f := fieldReq[P]{field: r.Field, value: r.Value, equal: r.Operator != selection.NotEquals}
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			if !strings.HasPrefix(r.Field, "\x00") {
				f.ix = s.indexes[r.Field]
			}
			if f.ix == nil {
				unknown = append(unknown, r.Field)
				continue
			}
		}
		reqs = append(reqs, f)
	}
	return reqs, unknown, nil
}

// scopeReqs is the requirements of scope, an informer's field selector.
func scopeReqs(scope string) fields.Requirements {
	sel, err := fields.ParseSelector(scope)
	if err != nil {
		return nil
	}
	return sel.Requirements()
}

// unindexed is the error of a cached List of res by fields in unknown,
// suggesting only what works: an index (IndexField) always; Uncached()
// if the server filters res by each (internal/fieldlabel, or the scope,
// a field selector the server took). A custom (declared) type's CRD may
// add field labels (selectableFields) only the server knows.
func unindexed(res Resource, custom bool, selector, scope string, unknown []string) error {
	msg := fmt.Sprintf("kctl: the cache cannot evaluate field selector %q: "+
		"%s has no index (a cached List answers metadata.name, "+
		"metadata.namespace and fields with an index of the same name): "+
		"declare one with kctl.IndexField(mgr, %q, fn) "+
		"(or AddIndex on the informer) before Start",
		selector, strings.Join(unknown, ", "), unknown[0])
	var scoped []string
	for _, r := range scopeReqs(scope) {
		scoped = append(scoped, r.Field)
	}
	server := fieldlabel.Server(res.Group, res.Kind, scoped)
	notServer := slices.DeleteFunc(slices.Clone(unknown), func(f string) bool {
		return slices.Contains(server, f)
	})
	if len(notServer) == 0 {
		return fmt.Errorf("%s, or list with Uncached() (the API server "+
			"filters %s by %s)", msg, res, strings.Join(unknown, ", "))
	}
	known := strings.Join(server, ", ")
	missing := strings.Join(notServer, ", ")
	if custom {
		return fmt.Errorf("%s; an Uncached() List works only if the "+
			"CRD of %s lists %s in selectableFields (the API server "+
			"filters it by %s and those)", msg, res, missing, known)
	}
	return fmt.Errorf("%s; not Uncached(): the API server filters %s "+
		"only by %s, not by %s", msg, res, known, missing)
}

func containsReq(reqs fields.Requirements, r fields.Requirement) bool {
	for _, h := range reqs {
		if h.Field == r.Field && h.Value == r.Value && (h.Operator == selection.NotEquals) == (r.Operator == selection.NotEquals) {
			return true
		}
	}
	return false
}

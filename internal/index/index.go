// Package index keeps the indexes of kctl's cache (see kctl's store.go):
// an index files the key of every stored object under each value its
// function returns for the object, so that a cached List by a label or
// an indexed field costs what it returns, not the size of the store. It
// plans and walks such a List over the store's objects (query.go,
// walk.go) and parses the field selectors a cached List answers
// (fields.go).
//
// Nothing here locks: the store's owner (the informer) guards a Set as
// it guards the store.
package index

import (
	"fmt"
	"iter"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Index files keys K of objects O under the values fn returns.
type Index[K comparable, O any] struct {
	fn     func(obj O) []string // the same values for the same object
	values map[string]map[K]struct{}
}

// Keys returns the keys filed under value. The map is the index's own:
// do not modify it.
func (ix *Index[K, O]) Keys(value string) map[K]struct{} {
	return ix.values[value]
}

// Has reports whether k is filed under value.
func (ix *Index[K, O]) Has(value string, k K) bool {
	_, ok := ix.values[value][k]
	return ok
}

// Count is the number of keys filed under values.
func (ix *Index[K, O]) Count(values []string) int {
	n := 0
	for _, v := range values {
		n += len(ix.values[v])
	}
	return n
}

// Len is the number of values that file a key.
func (ix *Index[K, O]) Len() int { return len(ix.values) }

func (ix *Index[K, O]) add(k K, obj O) {
	for _, v := range ix.fn(obj) {
		if ix.values[v] == nil {
			ix.values[v] = map[K]struct{}{}
		}
		ix.values[v][k] = struct{}{}
	}
}

func (ix *Index[K, O]) remove(k K, obj O) {
	for _, v := range ix.fn(obj) {
		delete(ix.values[v], k)
		if len(ix.values[v]) == 0 {
			delete(ix.values, v)
		}
	}
}

// MaxIndexes bounds the label indexes a Set builds by itself (with the
// user's): past it, a List by a new label key tests every object.
const MaxIndexes = 16

// Set is a store's indexes, by name: the user's (Define) and those of
// label keys (AddLabel). The zero Set is unusable: call NewSet.
type Set[K comparable, O any] struct {
	byName map[string]*Index[K, O]
	// labels returns an object's labels, for the label indexes and List.
	labels func(obj O) map[string]string
	// key makes the key of the object namespace/name; split takes it
	// apart. List walks the store's objects by namespace and name.
	key   func(namespace, name string) K
	split func(k K) (namespace, name string)
}

// NewSet returns an empty Set whose label indexes read labels, for a
// store whose key of the object namespace/name is key(namespace, name)
// and split(key) gives back namespace and name.
func NewSet[K comparable, O any](
	labels func(obj O) map[string]string,
	key func(namespace, name string) K,
	split func(k K) (namespace, name string),
) *Set[K, O] {
	return &Set[K, O]{
		byName: map[string]*Index[K, O]{},
		labels: labels,
		key:    key,
		split:  split,
	}
}

// Len is the number of indexes, the user's and the label ones.
func (s *Set[K, O]) Len() int { return len(s.byName) }

// Get returns the user's index named name, nil if none (a label
// index's name, which starts with NUL, is none).
func (s *Set[K, O]) Get(name string) *Index[K, O] {
	if strings.HasPrefix(name, "\x00") {
		return nil
	}
	return s.byName[name]
}

// Label returns the index of label key, nil if none.
func (s *Set[K, O]) Label(key string) *Index[K, O] {
	return s.byName[labelName(key)]
}

// Define adds the index name, filing every object of all in it. It
// fails if name is taken or fn is nil.
func (s *Set[K, O]) Define(
	name string,
	fn func(obj O) []string,
	all iter.Seq2[K, O],
) error {
	if _, ok := s.byName[name]; ok || fn == nil {
		return fmt.Errorf("kctl: index %q is already defined or has "+
			"no function: give each index one unique name", name)
	}
	ix := &Index[K, O]{fn: fn, values: map[string]map[K]struct{}{}}
	for k, obj := range all {
		ix.add(k, obj)
	}
	s.byName[name] = ix
	return nil
}

// Add files obj, stored under k, in every index.
func (s *Set[K, O]) Add(k K, obj O) {
	for _, ix := range s.byName {
		ix.add(k, obj)
	}
}

// Remove takes obj, stored under k, out of every index.
func (s *Set[K, O]) Remove(k K, obj O) {
	for _, ix := range s.byName {
		ix.remove(k, obj)
	}
}

// labelName names the index of label key among the user's indexes; the
// leading NUL keeps it apart from any name a user picks.
func labelName(key string) string { return "\x00label " + key }

// AddLabel builds the index of label key that ForLabels asked for, from
// the objects of all.
func (s *Set[K, O]) AddLabel(key string, all iter.Seq2[K, O]) {
	if s.Label(key) != nil {
		return
	}
	fn := func(obj O) []string {
		if v, ok := s.labels(obj)[key]; ok {
			return []string{v}
		}
		return nil
	}
	_ = s.Define(labelName(key), fn, all)
}

// ForLabels returns the label index that answers sel with the fewest
// keys, and the values to look up in it: sel's requirements key=value,
// key==value and key in (values) can be. If such a key has no index yet
// (and there is room for one), it returns the key as missing instead,
// for the caller to build it (AddLabel, under its write lock).
func (s *Set[K, O]) ForLabels(
	sel labels.Selector,
) (best *Index[K, O], values []string, missing string) {
	if sel == nil {
		return nil, nil, ""
	}
	reqs, _ := sel.Requirements()
	fewest := 0
	for _, r := range reqs {
		op := r.Operator()
		if op != selection.Equals &&
			op != selection.DoubleEquals &&
			op != selection.In {
			continue
		}
		ix := s.Label(r.Key())
		if ix == nil && len(s.byName) < MaxIndexes {
			return nil, nil, r.Key()
		}
		if ix == nil {
			continue
		}
		vals := r.Values().UnsortedList()
		if n := ix.Count(vals); best == nil || n < fewest {
			best = ix
			values = vals
			fewest = n
		}
	}
	return best, values, ""
}

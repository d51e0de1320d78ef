// Package undecodable tracks the objects of kctl's cache that exist on the
// server (as the last list or watch event of each says) but whose last
// state does not decode into the cache's type: a CRD field that changed
// type, a bad write to a field the schema does not check. The codec still
// decodes their metadata, so the cache knows their key (Decoding makes
// such an object's Error). A Set marks each with its error until it
// decodes again or is deleted; meanwhile the store (kctl's store.go)
// keeps its last good copy, if it ever decoded, and a relist never takes
// it for deleted (Relist). Each is logged once when it stops decoding and
// once when it decodes again (the Log functions).
//
// Nothing here locks: the store's owner (the informer) guards a Set as it
// guards the store.
package undecodable

import (
	"log/slog"
	"maps"
)

// Key is a store's key of an object; String names the object in the log.
type Key interface {
	comparable
	String() string
}

// Set is the undecodable objects by key, each with its error. The zero Set
// is unusable: call New.
type Set[K Key] struct {
	errs map[K]error
}

// New returns an empty Set.
func New[K Key]() *Set[K] {
	return &Set[K]{errs: map[K]error{}}
}

// Len is the number of undecodable objects.
func (s *Set[K]) Len() int { return len(s.errs) }

// Has reports whether the object under k is marked undecodable.
func (s *Set[K]) Has(k K) bool {
	_, ok := s.errs[k]
	return ok
}

// Mark records that the object under k exists but its state does not
// decode (err). It reports whether the object decoded before (first): log
// it then (Stopped), once per object.
func (s *Set[K]) Mark(k K, err error) (first bool) {
	_, was := s.errs[k]
	s.errs[k] = err
	return !was
}

// Clear forgets k: its object decodes again or is deleted.
func (s *Set[K]) Clear(k K) {
	delete(s.errs, k)
}

// Relist records a list's undecodable items, bad: key returns the key of
// each, false if not even its metadata decoded, and inScope tells the keys
// the list covers. It marks each keyed item and forgets the marked objects
// in scope that the list does not hold (gone while they did not decode). It
// reports whether the caller may take the objects the list does not hold
// for deleted: not if an item has no key, as any might be that one; then
// it forgets nothing either.
func Relist[K Key, E error](
	s *Set[K],
	bad []E,
	key func(item E) (K, bool),
	inScope func(k K) bool,
) (sweep bool) {
	listed := make(map[K]bool, len(bad))
	sweep = true
	for _, b := range bad {
		k, ok := key(b)
		if !ok {
			sweep = false
			continue
		}
		s.Mark(k, b)
		listed[k] = true
	}
	if !sweep {
		return false
	}
	for k := range s.errs {
		if inScope(k) && !listed[k] {
			delete(s.errs, k)
		}
	}
	return true
}

// Snapshot returns the marked objects now, for Since.
func (s *Set[K]) Snapshot() map[K]error {
	return maps.Clone(s.errs)
}

// Changes are the objects that stopped decoding, by their errors, and
// those that decode again, since a Snapshot.
type Changes[K Key] struct {
	Stopped []error
	Again   []K
}

// Since compares the marked objects with before (a Snapshot): one marked
// now and not before stopped decoding; one marked before and not now
// decodes again if stored says it is stored (else it was deleted).
func (s *Set[K]) Since(before map[K]error, stored func(k K) bool) Changes[K] {
	var c Changes[K]
	for k, err := range s.errs {
		if _, was := before[k]; !was {
			c.Stopped = append(c.Stopped, err)
		}
	}
	for k := range before {
		if !s.Has(k) && stored(k) {
			c.Again = append(c.Again, k)
		}
	}
	return c
}

// Log logs each of c, once, as the cache of resource: Stopped and Again.
func (c Changes[K]) Log(log *slog.Logger, resource string) {
	for _, err := range c.Stopped {
		Stopped(log, resource, err)
	}
	for _, k := range c.Again {
		Again(log, resource, k)
	}
}

// Stopped logs that an object of resource does not decode (err names it).
func Stopped(log *slog.Logger, resource string, err error) {
	msg := "kctl: cache could not decode an object: " +
		"it keeps the object's last good copy, if any, " +
		"until the object decodes again or is deleted; " +
		"fix the object or the Go type"
	log.Warn(msg, "resource", resource, "err", err)
}

// Again logs that the object of resource under k decodes again.
func Again[K Key](log *slog.Logger, resource string, k K) {
	msg := "kctl: cache decodes an object again"
	log.Info(msg, "resource", resource, "object", k.String())
}

// Skipped logs that the cache of resource skipped a watch event of type
// typ whose object does not decode, not even its key (err), or that it
// does not know.
func Skipped(log *slog.Logger, resource, typ string, err error) {
	msg := "kctl: cache skipped a watch event " +
		"it could not decode or of unknown type"
	log.Warn(msg, "resource", resource,
		"event", typ, "err", err)
}

// Keyless logs that a list of resource holds an object whose metadata does
// not decode either (err): the list deletes no object, as any might be
// that one (Relist).
func Keyless(log *slog.Logger, resource string, err error) {
	msg := "kctl: cache could not decode an object, " +
		"not even its metadata: " +
		"this list deletes no object from the cache"
	log.Warn(msg, "resource", resource, "err", err)
}

// Package nscover records, by resource, which namespaces a cache holds
// the objects of, where a shard member's caches split a resource by
// namespace: read-your-writes waits only for the writes its caches will
// see. A resource never split is held whole.
package nscover

import "sync"

// Set is the namespaces held, by resource (any string naming one). The
// zero Set holds every resource whole. Safe for concurrent use.
type Set struct {
	mu sync.RWMutex
	// by holds, for each split resource, whether a namespace is held.
	by map[string]func(namespace string) bool
}

// Split makes res's namespaces held those covers takes in, from now on.
func (s *Set) Split(res string, covers func(namespace string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]func(string) bool{}
	}
	s.by[res] = covers
}

// Covered reports whether the objects of namespace of res are held:
// always, unless Split split res.
func (s *Set) Covered(res, namespace string) bool {
	s.mu.RLock()
	covers := s.by[res]
	s.mu.RUnlock()
	return covers == nil || covers(namespace)
}

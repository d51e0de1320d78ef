package scope

import "time"

// PerType is a cache's configuration of each type, by resource K, set
// before the type's informer is made: its scope S (kctl.ScopeFor), a
// transform of each object (kctl.TransformFor: a func(*T) of the type's
// T), its resync period (kctl.ResyncFor), and whether the cache holds
// the type's objects in part only (as their metadata). The zero PerType
// is empty and ready; it is not safe for concurrent use (the cache's lock
// guards it).
type PerType[K comparable, S any] struct {
	scopes     map[K]S
	transforms map[K]any
	resyncs    map[K]time.Duration
	// partial holds, by resource, the error of a cached read of it while
	// the cache holds its objects in part only: such a read makes no
	// informer.
	partial map[K]error
}

// Scope is k's scope, if one was set.
func (p *PerType[K, S]) Scope(k K) (S, bool) {
	s, ok := p.scopes[k]
	return s, ok
}

// SetScope sets k's scope.
func (p *PerType[K, S]) SetScope(k K, s S) {
	setIn(&p.scopes, k, s)
}

// Transform is k's transform (a func(*T)), nil if none was set.
func (p *PerType[K, S]) Transform(k K) any {
	return p.transforms[k]
}

// SetTransform sets k's transform, a func(*T) of k's type T.
func (p *PerType[K, S]) SetTransform(k K, fn any) {
	setIn(&p.transforms, k, fn)
}

// Resync is k's resync period, if one was set.
func (p *PerType[K, S]) Resync(k K) (time.Duration, bool) {
	d, ok := p.resyncs[k]
	return d, ok
}

// SetResync sets k's resync period (0: never).
func (p *PerType[K, S]) SetResync(k K, d time.Duration) {
	setIn(&p.resyncs, k, d)
}

// Partial is the error of a cached read of k, if the cache holds k's
// objects in part only (SetPartial), else nil.
func (p *PerType[K, S]) Partial(k K) error {
	return p.partial[k]
}

// SetPartial records that the cache holds k's objects in part only: a
// cached read of k is then refused with err (not nil), and makes no
// informer.
func (p *PerType[K, S]) SetPartial(k K, err error) {
	setIn(&p.partial, k, err)
}

// setIn sets m[k] to v, making m on first use: the zero PerType is
// ready to use.
func setIn[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

package kctl

// Floor 2: a Cache's configuration per type, set before the type's
// informer is made: its scope (ScopeFor), a transform of each object
// (TransformFor) and its resync period (ResyncFor), which floor 1's Cache
// reads when it makes the informer (Cache.informer, initInformer); and an
// Informer's own indexes (AddIndex, ByIndex).

import (
	"fmt"
	"time"
)

// ScopeFor sets the scope of T's informer. Call it before the informer is made.
func ScopeFor[T any, PT Object[T]](c *Cache, s Scope) error {
	return configure[T](c, func(res Resource) { c.scopes[res] = s })
}

// TransformFor sets fn to change each of T's objects (after managedFields
// are dropped) before it is stored, e.g. to clear fields nobody reads. fn
// owns the object, and must not make it point at memory it does not own (a
// package-level default, a part of another object): the cache then makes the
// object share equal parts with stored ones, rewriting what it points at.
// Call it before T's informer is made.
func TransformFor[T any, PT Object[T]](c *Cache, fn func(obj *T)) error {
	return configure[T](c, func(res Resource) { c.transforms[res] = fn })
}

// ResyncFor sets the resync period of T's informer (see
// CacheOptions.Resync, whose default it replaces for T; 0: never), as
// client-go's informers have one per handler:
//
//	kctl.ResyncFor[corev1.ConfigMap](mgr.Cache(), 10*time.Minute)
//
// The period is stretched by a random 0-10 % per informer, and each
// resync is spread out: the objects are re-delivered in order of
// namespace and name, in up to 1,000 evenly spaced batches (at most one a
// millisecond) over the first half of the period, so a resync never
// arrives as one burst. Each object is re-delivered once per resync, in
// its state when its batch comes (one deleted by then is skipped); live
// changes are not held back by it. Call it before T's informer is made.
func ResyncFor[T any, PT Object[T]](c *Cache, every time.Duration) error {
	return configure[T](c, func(res Resource) { c.resyncs[res] = max(every, 0) })
}

func configure[T any](c *Cache, set func(res Resource)) error {
	res, err := ResourceOf[T]()
	if err != nil {
		return fmt.Errorf("kctl: cannot configure the cache: %w", unprefixed(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, whole := c.informers[res]
	_, meta := c.informers[metadataKey(res)]
	if whole || meta {
		return fmt.Errorf("kctl: the cache of %s is already made: "+
			"configure it before its first use", res)
	}
	set(res)
	return nil
}

// An informer's own indexes: AddIndex files its objects under the values
// a function returns, ByIndex reads them back. The store keeps them
// (store.go, internal/index) and a cached List's field selector reads
// them by name (store.fieldReqs).

// ByIndex returns the objects that the index named index files under value
// (nil for an unknown index). The objects are shared: do not modify them.
func (i *Informer[T]) ByIndex(index, value string) []*T {
	return i.informer.ByIndex(index, value)
}

// AddIndex adds an index: fn returns the values an object is filed under,
// the same each time for the same object. Add indexes before Start, so they
// are not built under the lock from a full store.
//
//	pods.AddIndex("node", func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })
func (i *Informer[T]) AddIndex(name string, fn func(obj *T) []string) error {
	return i.informer.AddIndex(name, fn)
}

// ByIndex is Informer.ByIndex in the core.
func (i *informer[P]) ByIndex(index, value string) []P {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.byIndex(index, value)
}

// AddIndex is Informer.AddIndex in the core.
func (i *informer[P]) AddIndex(name string, fn func(obj P) []string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.store.addIndex(name, fn); err != nil {
		return fmt.Errorf("%w (%s)", err, i)
	}
	return nil
}

func (s *store[P]) addIndex(name string, fn func(obj P) []string) error {
	return s.indexes.Define(name, fn, s.each())
}

func (s *store[P]) byIndex(name, value string) []P {
	ix := s.indexes.Get(name)
	if ix == nil {
		return nil
	}
	keys := ix.Keys(value)
	out := make([]P, 0, len(keys))
	for k := range keys {
		out = append(out, s.objects[k.namespace][k.name].obj)
	}
	return out
}

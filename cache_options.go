package kctl

// Floor 2: a Cache's configuration per type, set before the type's
// informer is made: its scope (ScopeFor), a transform of each object
// (TransformFor) and its resync period (ResyncFor). Floor 1's Cache reads
// them when it makes the informer (Cache.informer, initInformer).

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

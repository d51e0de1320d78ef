package kctl

// Floor 2: a Cache's configuration per type, set before the type's
// informer is made: its scope (ScopeFor) and a transform of each object
// (TransformFor), which floor 1's Cache reads when it makes the informer
// (Cache.informer, initInformer), and its resync period (ResyncFor); the
// periodic resync itself, on the informer's resync hook (resyncBy, from
// the Cache's made hook); and an Informer's own indexes (AddIndex,
// ByIndex), with, at the end, field indexes declared on the Manager
// (IndexField) and the field selector that lists by one (MatchingField),
// as controller-runtime's FieldIndexer and client.MatchingFields.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/resync"
	"k8s.io/apimachinery/pkg/fields"
)

// ScopeFor sets the scope of T's informer. Call it before the informer is made.
func ScopeFor[T any, PT Object[T]](c *Cache, s Scope) error {
	return configure[T](c, func(res Resource) { c.types.SetScope(res, s) })
}

// TransformFor sets fn to change each of T's objects (after managedFields
// are dropped) before it is stored, e.g. to clear fields nobody reads. fn
// owns the object, and must not make it point at memory it does not own (a
// package-level default, a part of another object): the cache then makes the
// object share equal parts with stored ones, rewriting what it points at.
// Call it before T's informer is made.
func TransformFor[T any, PT Object[T]](c *Cache, fn func(obj *T)) error {
	return configure[T](c, func(res Resource) { c.types.SetTransform(res, fn) })
}

// ResyncFor sets the resync period of T's informer (see
// CacheOptions.Resync, whose default it replaces for T; 0: never), as
// client-go's informers have one per handler:
//
//	kctl.ResyncFor[corev1.ConfigMap](mgr.Cache(), 10*time.Minute)
//
// The period is stretched by a random 0-10 % per informer (jitter), so
// that types, and replicas, with one period do not resync at once, and
// each resync is spread out: the objects are re-delivered in order of
// namespace and name, in up to 1,000 evenly spaced batches (at most one a
// millisecond) over the first half of the period, so a resync never
// arrives as one burst. Each object is re-delivered once per resync, in
// its state when its batch comes (one deleted by then is skipped); live
// changes are not held back by it, and a controller queues the keys of a
// resync at the low priority of the initial list, behind live changes.
// NewCache and NewManager put the period on each informer (resyncBy).
// Call it before T's informer is made.
func ResyncFor[T any, PT Object[T]](c *Cache, every time.Duration) error {
	return configure[T](c, func(res Resource) { c.types.SetResync(res, max(every, 0)) })
}

// resyncOf is the resync period of res's informers: ResyncFor's, else
// CacheOptions.Resync.
func (c *Cache) resyncOf(res Resource) time.Duration {
	resync, ok := c.types.Resync(res)
	if !ok {
		return c.opts.Resync
	}
	return resync
}

// resyncBy sets made's resync hook (informer.resync) to resync about
// every period of its resource (resyncOf): see resyncAbout. NewCache and
// NewManager call it from the Cache's made hook, with c.mu held, before
// made runs.
func (c *Cache) resyncBy(made cachedInformer) {
	inf, ok := made.(interface{ resyncAbout(time.Duration) })
	if ok {
		inf.resyncAbout(c.resyncOf(made.resource()))
	}
}

// The periodic resync (informer.resync, set by resyncEvery) re-delivers
// each stored object to the handlers once a period, as an Updated event
// with Resync set, spread out by internal/resync: the keys stored when a
// resync starts, in order (by namespace, then name), in evenly spaced
// batches over the first half of the period. Each object is re-delivered
// once per resync, in its state when its batch comes; one deleted before
// then is skipped (its Deleted event went out), one added after the start
// waits for the next. A batch holds mu only while it queues its events,
// so live changes go out between batches, at once.

// resyncAbout is resyncEvery of period stretched by a random 0-10 %
// (resync.Jitter), so that informers made together do not resync
// together; none if period is 0. resyncBy asserts it, not resyncEvery:
// too big to be inlined into the method wrappers of each Informer[T], it
// has them call it rather than copy resyncEvery's closures (typecost).
func (i *informer[P]) resyncAbout(period time.Duration) {
	period = resync.Jitter(period)
	if period > 0 {
		i.resyncEvery(period)
	}
}

// resyncEvery sets the informer's resync hook to resync every period,
// until run's ctx ends.
func (i *informer[P]) resyncEvery(period time.Duration) {
	i.resync = func(ctx context.Context) {
		resync.Run(ctx, period, i.resyncKeys, i.resyncBatch)
	}
}

// resyncKeys returns the keys of the stored objects, in order, if there
// is a handler to tell and the informer is synced; else none. It sorts
// them after unlocking, so live changes wait only for the copy.
func (i *informer[P]) resyncKeys() []objKey {
	i.mu.RLock()
	if len(i.handlers) == 0 || !i.syncedLocked() {
		i.mu.RUnlock()
		return nil
	}
	keys := make([]objKey, 0, i.store.count)
	for ns, inner := range i.store.objects {
		for name := range inner {
			keys = append(keys, objKey{ns, name})
		}
	}
	i.mu.RUnlock()
	slices.SortFunc(keys, func(a, b objKey) int {
		c := cmp.Compare(a.namespace, b.namespace)
		if c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return keys
}

// resyncBatch re-delivers the objects stored under keys, skipping any
// that is gone.
func (i *informer[P]) resyncBatch(keys []objKey) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, k := range keys {
		obj, ok := i.store.get(k.namespace, k.name)
		if !ok {
			continue
		}
		e := event[P]{Type: Updated, Object: obj}
		e.Old = obj
		e.Resync = true
		i.emitLocked(e)
	}
}

func configure[T any](c *Cache, set func(res Resource)) error {
	res, err := ResourceOf[T]()
	if err != nil {
		return fmt.Errorf("kctl: cannot configure the cache: %w", unprefixed(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, whole := c.informers[res]
	// partial: the cache holds res's metadata (metadata.go)
	partial := c.types.Partial(res) != nil
	if whole || partial {
		return fmt.Errorf("kctl: the cache of %s is already made: "+
			"configure it before its first use", res)
	}
	set(res)
	return nil
}

// An informer's own indexes: AddIndex files its objects under the values
// a function returns, ByIndex reads them back. The store keeps them
// (store.go, internal/index) and a cached List's field selector reads
// them by name (informer.listLocked).

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

// IndexField declares an index of the cached objects of type T, named
// field: fn returns the values an object is filed under, the same each
// time for the same object. A cached List (of a ClientFor client, or of
// the informer) answers a field selector on field from it:
//
//	err := kctl.IndexField(mgr, "spec.nodeName", func(p *corev1.Pod) []string {
//		return []string{p.Spec.NodeName}
//	})
//	...
//	pods.List(ctx, kctl.ListOptions{Fields: kctl.MatchingField("spec.nodeName", node)})
//
// Declare indexes before Start (right after NewManager), so that they are
// not built from a full cache under its lock. It makes T's informer, as a
// controller or a source of T would. An index name is the cache's, not the
// server's: Uncached() reads send the selector to the server, which knows
// only its own field labels (metadata.name, metadata.namespace and a few
// per type, e.g. spec.nodeName of a Pod). It fails, naming T and field, if
// T is not an API type or field is empty or already indexed.
func IndexField[T any, PT Object[T]](m *Manager, field string, fn func(obj *T) []string) error {
	if field == "" {
		return fmt.Errorf("kctl: IndexField: the field name is empty: " +
			"name the index, e.g. \"spec.nodeName\"")
	}
	inf, err := InformerFor[T, PT](m.cache)
	if err != nil {
		return fmt.Errorf("kctl: IndexField(%q): %w", field, unprefixed(err))
	}
	return inf.AddIndex(field, fn)
}

// MatchingField is the field selector that requires field to equal value,
// with value escaped, so that a value with "," or "=" in it selects
// itself and nothing else:
//
//	kctl.ListOptions{Namespace: ns, Fields: kctl.MatchingField("spec.owner", "a=b,c")}
//
// Join several with ",". A cached List answers it from the index named
// field (IndexField).
func MatchingField(field, value string) string {
	return fields.OneTermEqualSelector(field, value).String()
}

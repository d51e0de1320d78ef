package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kctl-dev/kctl/internal/share"
)

// Informer keeps a local, read-only copy of one resource's objects in scope
// and tells handlers about every change.
//
//	pods, err := kctl.InformerFor[corev1.Pod](cache)
//	pods.AddHandler(func(e kctl.Event[corev1.Pod]) { queue.Add(e.Object.Name) })
//	err = pods.WaitForSync(ctx)
//	pod, ok := pods.Get("default", "web-0") // shared: do not modify
//
// Model: list in pages of 500, then watch with bookmarks, resuming from the
// newest resourceVersion seen; a watch lasts 5 to 10 minutes at random. When
// that resourceVersion is gone (410), list again and report only what
// changed. An object that stops decoding into T keeps its last good copy
// until it decodes again or is deleted (see Undecodable). Failures are
// logged, reported by Err and retried after 200ms
// doubling up to 30s (10s for a missing CRD), less up to half at random, at
// least the server's Retry-After; a watch open for 10s resets the backoff.
//
// The zero Informer is unusable: get one from InformerFor. Most callers want
// AddHandler, WaitForSync, then Get or List. Safe for concurrent use. The
// informer is the store's only writer: objects from reads and events are
// shared, must not be modified (deepCopy first), and may be stale. Stored
// objects also share equal strings, string maps and resource lists with each
// other (internal/share): the Pods of one workload hold one copy of their labels,
// image and requests, which more than halves a Pod's memory in the cache.
type Informer[T any] struct {
	res       Resource
	client    *Client[T]
	transform func(obj *T)     // readies a decoded object for the store
	sharer    *share.Sharer[T] // then makes it share equal parts with stored objects
	resync    time.Duration
	healthy   time.Duration // a watch open this long resets the backoff: healthyWatch, shorter in tests
	log       *slog.Logger

	// mu guards what follows. The store changes, and events are queued to
	// handlers, only under mu: every handler sees the changes in store order.
	mu       sync.RWMutex
	store    *store[T]
	watches  []*watchState // one per namespace in scope, or one for all
	handlers []*handler[T]
	progress chan struct{}   // closed on any progress, for waiters; nil when nobody waits
	ctx      context.Context // run's; nil before run
	stopped  bool            // run's ctx ended: no goroutine is added to wg after this
	wg       sync.WaitGroup
}

// watchState is one list/watch. Only its listWatch goroutine changes it, under mu.
type watchState struct {
	opts   ListOptions // a namespace ("" for all) and the scope's selectors
	rv     string      // the newest resourceVersion applied
	synced bool        // the first list is stored
	err    error       // the last failure; nil after a success
}

// String is "cache of <resource>", e.g. "cache of pods/v1".
func (i *Informer[T]) String() string { return "cache of " + i.res.String() }

// HasSynced reports whether the first list of every namespace in scope is stored.
func (i *Informer[T]) HasSynced() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.syncedLocked()
}

func (i *Informer[T]) syncedLocked() bool {
	return !slices.ContainsFunc(i.watches, func(w *watchState) bool { return !w.synced })
}

// WaitForSync returns nil once HasSynced. If ctx ends first, its error says
// why the informer is not synced (e.g. not installed, forbidden).
func (i *Informer[T]) WaitForSync(ctx context.Context) error {
	return i.wait(ctx, "sync", i.syncedLocked)
}

// Err is nil while the informer is synced and healthy, else it says what it
// waits for, e.g. an error matching ErrNotInstalled. For readiness checks.
func (i *Informer[T]) Err() error {
	i.mu.RLock()
	defer i.mu.RUnlock()
	switch err := i.failureLocked(); {
	case err != nil:
		return err
	case i.ctx == nil:
		return fmt.Errorf("kctl: %s is not started: start the Cache", i)
	case i.stopped:
		return fmt.Errorf("kctl: %s is stopped", i)
	case !i.syncedLocked():
		return fmt.Errorf("kctl: %s is still syncing", i)
	}
	return nil
}

func (i *Informer[T]) failureLocked() error {
	for _, w := range i.watches {
		if w.err != nil {
			return w.err
		}
	}
	return nil
}

// run runs the informer until ctx ends, then waits for its goroutines. Called once, by the Cache.
func (i *Informer[T]) run(ctx context.Context) {
	i.mu.Lock()
	i.ctx = ctx
	for _, h := range i.handlers {
		i.goLocked(h.run)
	}
	for _, w := range i.watches {
		i.goLocked(func(ctx context.Context) { i.listWatch(ctx, w) })
	}
	if i.resync > 0 {
		i.goLocked(i.resyncEvery)
	}
	i.mu.Unlock()
	<-ctx.Done()
	i.mu.Lock()
	i.stopped = true
	i.notifyLocked()
	i.mu.Unlock()
	i.wg.Wait()
}

// goLocked runs fn(run's ctx) in a goroutine, if the informer runs.
func (i *Informer[T]) goLocked(fn func(ctx context.Context)) {
	if ctx := i.ctx; ctx != nil && !i.stopped {
		i.wg.Go(func() { fn(ctx) })
	}
}

// Cache is the set of informers one Manager shares: one Informer per
// resource, in the scope configured for its type, made on first use by
// InformerFor (a controller) or a cached client read.
//
//	cache := kctl.NewCache(conn, kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{"shop"}}})
//	kctl.ScopeFor[corev1.Secret](cache, kctl.Scope{Labels: labels.SelectorFromSet(labels.Set{"app": "web"})})
//	go cache.Start(ctx)
//	pods, err := kctl.InformerFor[corev1.Pod](cache)
//
// The zero Cache is unusable: call NewCache, which starts nothing. Start runs
// the informers made so far and any made later. Safe for concurrent use.
type Cache struct {
	conn       *Conn
	opts       CacheOptions
	mu         sync.Mutex
	scopes     map[Resource]Scope
	transforms map[Resource]any // a func(*T) for the resource's type T
	informers  map[Resource]interface{ run(ctx context.Context) }
	// made, if set, is called once per informer, when it is made, under mu
	// and before it runs: the Manager's cache shows each of its informers on
	// the metrics page and tracks the Manager's writes in it.
	made    func(inf madeInformer)
	ctx     context.Context // Start's; nil before Start
	stopped bool            // Start's ctx ended: no goroutine is added to wg after this
	wg      sync.WaitGroup
}

// CacheOptions configures a Cache. The zero value caches every object of a
// type, without managedFields, with no resync.
type CacheOptions struct {
	// DefaultScope scopes every type without a ScopeFor (its Namespaces only
	// the namespaced types). Defaults to everything.
	DefaultScope Scope
	// KeepManagedFields keeps metadata.managedFields, which the cache drops by
	// default: few controllers read them, and they are often a third of an object.
	KeepManagedFields bool
	// Resync, if positive, re-delivers every object to the handlers every
	// Resync, as an Updated event with Resync set. A controller queues the
	// keys of a resync at the low priority of the initial list, behind live
	// changes. Defaults to never.
	Resync time.Duration
	Logger *slog.Logger // defaults to slog.Default()
}

// Scope selects which objects of a type the cache holds. The zero Scope is
// every object in the cluster.
type Scope struct {
	Namespaces []string        // if any, each is listed and watched on its own, into one store
	Labels     labels.Selector // nil: any labels
	Fields     string          // evaluated by the server, e.g. "spec.nodeName=node-1"
}

// NewCache returns a Cache reading through conn. It starts nothing.
func NewCache(conn *Conn, opts CacheOptions) *Cache {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Cache{conn: conn, opts: opts, scopes: map[Resource]Scope{}, transforms: map[Resource]any{},
		informers: map[Resource]interface{ run(ctx context.Context) }{}}
}

// madeInformer is what a Cache's made hook sees of a new Informer[T].
type madeInformer interface {
	resource() Resource
	Stats() (objects int, bytes int64)
	Undecodable() int
	trackWrites(w *writeTracker)
}

func (i *Informer[T]) resource() Resource { return i.res }

// Start runs the informers, including those made later, until ctx ends, then
// waits for their goroutines and returns nil. Call it once, in its own goroutine.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.ctx != nil {
		c.mu.Unlock()
		return errors.New("kctl: Cache.Start called twice: start a Cache once")
	}
	c.ctx = ctx
	for _, inf := range c.informers {
		c.wg.Go(func() { inf.run(ctx) })
	}
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

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

func configure[T any](c *Cache, set func(res Resource)) error {
	res, err := ResourceOf[T]()
	if err != nil {
		return fmt.Errorf("kctl: cannot configure the cache: %w", unprefixed(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.informers[res]; ok {
		return fmt.Errorf("kctl: the cache of %s is already made: configure it before its first use", res)
	}
	set(res)
	return nil
}

// InformerFor returns T's informer, making it on first use; it runs once c is started.
func InformerFor[T any, PT Object[T]](c *Cache) (*Informer[T], error) {
	return informerFor[T, PT](c, false)
}

// readInformer is InformerFor for a cached client read: it warns when that makes
// an informer of every object of a type nobody scoped (surprise memory use).
func readInformer[T any, PT Object[T]](c *Cache) (*Informer[T], error) {
	return informerFor[T, PT](c, true)
}

func informerFor[T any, PT Object[T]](c *Cache, read bool) (*Informer[T], error) {
	res, err := ResourceOf[T]()
	if err != nil {
		return nil, fmt.Errorf("kctl: cannot cache: %w", unprefixed(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.informers[res]; ok {
		if typed, ok := inf.(*Informer[T]); ok {
			return typed, nil
		}
		return nil, fmt.Errorf("kctl: %s is cached as another Go type (%T): use one Go type per resource", res, inf)
	}
	if c.stopped {
		return nil, fmt.Errorf("kctl: cannot cache %s: the cache is stopped", res)
	}
	scope, scoped := c.scopes[res]
	if !scoped {
		scope = c.opts.DefaultScope
		scoped = len(scope.Namespaces) > 0 || scope.Labels != nil && !scope.Labels.Empty() || scope.Fields != ""
	}
	if read && !scoped {
		c.opts.Logger.Warn("kctl: a client read started caching every "+res.String()+" in the cluster; "+
			"scope it with kctl.ScopeFor, or read with Uncached()", "resource", res.String())
	}
	keep := c.opts.KeepManagedFields
	transform, _ := c.transforms[res].(func(*T))
	inf := &Informer[T]{res: res, client: NewClient[T, PT](c.conn), resync: c.opts.Resync, healthy: healthyWatch, log: c.opts.Logger,
		store: newStore[T](), sharer: share.New[T](), transform: func(obj *T) {
			if !keep {
				metaOf(obj).SetManagedFields(nil)
			}
			if transform != nil {
				transform(obj)
			}
		}}
	inf.client.codec.skipManagedFields = !keep // not even decoded (protobuf)
	namespaces := slices.Compact(slices.Sorted(slices.Values(scope.Namespaces)))
	if !res.Namespaced || len(namespaces) == 0 || slices.Contains(namespaces, "") {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		opts := ListOptions{Namespace: ns, Labels: scope.Labels, Fields: scope.Fields}
		inf.watches = append(inf.watches, &watchState{opts: opts})
	}
	c.informers[res] = inf
	if c.made != nil {
		c.made(inf)
	}
	if ctx := c.ctx; ctx != nil {
		c.wg.Go(func() { inf.run(ctx) })
	}
	return inf, nil
}

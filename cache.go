package kctl

// Cache: one informer per resource, in the scope configured for its type,
// made on first use. The cached reads of a Manager's Clients are in
// cache_reads.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/objprep"
	"github.com/kctl-dev/kctl/internal/readmiss"
	"github.com/kctl-dev/kctl/internal/scope"
	"github.com/kctl-dev/kctl/internal/share"
	"k8s.io/apimachinery/pkg/labels"
)

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
	conn *Conn
	opts CacheOptions
	mu   sync.Mutex
	// types is each type's scope, transform and resync period, set
	// before its informer is made (cache_options.go), and the error of a
	// cached read of a type the cache holds as metadata only, which makes
	// no informer (metadata.go): internal/scope.
	types     scope.PerType[Resource, Scope]
	informers map[Resource]cachedInformer
	// made, if set, sees every informer once, when it is made, under mu
	// and before it runs: NewCache and NewManager set it (constructors.go:
	// the watch-list stream, the resync, metrics, read-your-writes; a shard
	// member wraps it). Called in one place, Cache.informer.
	made func(inf cachedInformer)
	// barrier, if set, holds back a cached read, and a reconcile, until
	// the informer has caught up with the writes it could see:
	// readyourwrites.go's writeTracker, which NewManager sets. Called in
	// one place, Cache.caughtUp.
	barrier readBarrier
	// ctx is Start's; nil before Start.
	ctx context.Context
	// stopped means Start's ctx ended: no goroutine is added to wg after
	// this.
	stopped bool
	wg      sync.WaitGroup
}

// CacheOptions configures a Cache. The zero value caches every object of a
// type, without managedFields, with no resync.
type CacheOptions struct {
	// DefaultScope scopes every type without a ScopeFor (its Namespaces only
	// the namespaced types). Defaults to everything.
	DefaultScope Scope
	// KeepManagedFields keeps metadata.managedFields, which the cache drops
	// by default: few controllers read them, and they are often a third of
	// an object.
	KeepManagedFields bool
	// Resync, if positive, re-delivers every object to the handlers every
	// Resync, as an Updated event with Resync set, stretched and spread
	// out as ResyncFor, which sets it per type, says. Defaults to never.
	Resync time.Duration
	// ReaderFailOnMissingInformer makes a cached read (a ClientFor
	// client's Get or List) of a type the cache does not watch yet an
	// error matching ErrNotCached, as controller-runtime's option of that
	// name does, instead of a warning and a new informer of that type.
	// The cache watches a type once a controller or a source uses it, or
	// InformerFor makes its informer. Defaults to false.
	ReaderFailOnMissingInformer bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ErrNotCached matches (with errors.Is) the error of a cached read of a
// type the cache does not watch, with ReaderFailOnMissingInformer, or
// holds as metadata only (OwnsMetadata, WatchesMetadata).
var ErrNotCached = readmiss.ErrNotCached

// Scope selects which objects of a type the cache holds. The zero Scope is
// every object in the cluster.
type Scope struct {
	// Namespaces, if any, are each listed and watched on their own, into
	// one store.
	Namespaces []string
	// Labels nil means any labels.
	Labels labels.Selector
	// Fields is evaluated by the server, e.g. "spec.nodeName=node-1".
	Fields string
}

// newCache is NewCache (constructors.go) without the watch-list
// stream: its informers list in pages.
func newCache(conn *Conn, opts CacheOptions) *Cache {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Cache{
		conn:      conn,
		opts:      opts,
		informers: map[Resource]cachedInformer{},
	}
}

// Start runs the informers, including those made later, until ctx ends, then
// waits for their goroutines and returns nil. Call it once, in its own
// goroutine.
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

// InformerFor returns T's informer, making it on first use; it runs once c
// is started.
func InformerFor[T any, PT Object[T]](c *Cache) (*Informer[T], error) {
	return informerFor[T, PT](c, false)
}

// readInformer is InformerFor for a cached client read, which reads its
// core (cachedReads): it warns when that makes an informer of every
// object of a type nobody scoped (surprise memory use).
func readInformer[T any, PT Object[T]](c *Cache) (*informer[*T], error) {
	inf, err := informerFor[T, PT](c, true)
	if err != nil {
		return nil, err
	}
	return &inf.informer, nil
}

func informerFor[T any, PT Object[T]](
	c *Cache,
	read bool,
) (*Informer[T], error) {
	res, err := ResourceOf[T]()
	if err != nil {
		return nil, fmt.Errorf("kctl: cannot cache: %w", unprefixed(err))
	}
	newInformer := func(scope Scope) cachedInformer {
		cl := &NewClient[T, PT](c.conn).client
		inf := &Informer[T]{}
		initInformer(&inf.informer, c, res, cl, scope)
		return inf
	}
	inf, err := c.informer(res, res, read, newInformer)
	if err != nil {
		return nil, err
	}
	typed, ok := inf.(*Informer[T])
	if !ok {
		return nil, fmt.Errorf("kctl: %s is cached as another Go type (%T): "+
			"use one Go type per resource", res, inf)
	}
	return typed, nil
}

// cachedInformer is what a Cache holds of an Informer[T] (or its core)
// of any T: its run and its resource. The made hook's fillers ask more of
// it (countInformer: Stats and Undecodable, informer_more.go), so that
// floor 1 compiles without them.
type cachedInformer interface {
	run(ctx context.Context)
	resource() Resource
}

// readBarrier is the Cache's barrier: see Cache.barrier.
type readBarrier interface {
	// wait returns once inf has caught up with the writes a read of
	// namespace/name ("" name: a List of namespace) could see, or
	// with an error naming the write it gave up on.
	wait(ctx context.Context, inf cachedInformer, namespace, name string) error
}

// caughtUp returns once inf has caught up with the writes a read of
// namespace/name could see (Cache.barrier; at once without one).
func (c *Cache) caughtUp(
	ctx context.Context,
	inf cachedInformer,
	namespace, name string,
) error {
	if c.barrier == nil {
		return nil
	}
	return c.barrier.wait(ctx, inf, namespace, name)
}

// informer is informerFor (and metadata.go's metadataInformer) for any
// T: it returns the informer c holds under key (res, for res's objects;
// metadata.go's key for their metadata), making it with newInformer (in
// the scope configured for res, with mu held) on first use. read says a
// cached client read wants it: a read never makes an informer with
// ReaderFailOnMissingInformer, or of a resource held in part only
// (types.Partial), and warns when it makes one of every object of a type
// nobody scoped (surprise memory use): internal/readmiss.
func (c *Cache) informer(
	res, key Resource,
	read bool,
	newInformer func(scope Scope) cachedInformer,
) (cachedInformer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.informers[key]; ok {
		return inf, nil
	}
	if c.stopped {
		what := res.String()
		if key != res { // the metadata-only form (metadata.go)
			what = "the metadata of " + what
		}
		return nil, fmt.Errorf("kctl: cannot cache %s: the cache is stopped", what)
	}
	sc, scoped := c.types.Scope(res)
	if !scoped {
		sc = c.opts.DefaultScope
		scoped = scope.Narrows(sc.Namespaces, sc.Labels, sc.Fields)
	}
	if read { // refused, failed or warned of: internal/readmiss
		err := readmiss.Check(
			res.String(),
			c.types.Partial(res),
			c.opts.ReaderFailOnMissingInformer,
			scoped,
			c.opts.Logger,
		)
		if err != nil {
			return nil, err
		}
	}
	inf := newInformer(sc)
	c.informers[key] = inf
	if c.made != nil {
		c.made(inf)
	}
	ctx := c.ctx
	if ctx != nil {
		c.wg.Go(func() { inf.run(ctx) })
	}
	return inf, nil
}

// initInformer makes inf the informer of res, reading with cl, in scope,
// configured as c is for res. Call it with c.mu held.
func initInformer[P any](
	inf *informer[P],
	c *Cache,
	res Resource,
	cl *client[P],
	scope Scope,
) {
	// the func(*T) of TransformFor
	transform, _ := c.types.Transform(res).(func(P))
	// Drops managedFields, then transforms; sets the decoder to match.
	keep := c.opts.KeepManagedFields
	prepare := objprep.Func(keep, transform, &cl.codec.wire)
	var none P
	*inf = informer[P]{
		res:       res,
		name:      res.String(),
		client:    cl,
		healthy:   healthyWatch,
		log:       c.opts.Logger,
		store:     newStore[P](),
		sharer:    share.New(none),
		transform: prepare,
		watches:   scopeWatches(res, scope),
	}
}

// scopeWatches is a list/watch per namespace of sc, or one for all
// (internal/scope).
func scopeWatches(res Resource, sc Scope) []*watchState {
	namespaces := scope.Namespaces(res.Namespaced, sc.Namespaces)
	var watches []*watchState
	for _, ns := range namespaces {
		opts := ListOptions{
			Namespace: ns,
			Labels:    sc.Labels,
			Fields:    sc.Fields,
		}
		watches = append(watches, &watchState{opts: opts})
	}
	return watches
}

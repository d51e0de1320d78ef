package kctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Informer keeps a local, read-only copy of one resource's objects in scope
// and tells handlers about every change.
//
//	pods, err := kctl.InformerFor[corev1.Pod](cache)
//	pods.AddHandler(func(e kctl.Event[corev1.Pod]) { queue.Add(e.Object.Name) })
//	if err := pods.WaitForSync(ctx); err != nil { ... }
//	pod, ok := pods.Get("default", "web-0") // shared: do not modify
//
// Model: list then watch, from the list's resourceVersion, with bookmarks.
// Each watch ends after a random 5 to 10 minutes and resumes from the newest
// resourceVersion seen; if that is too old (410 Gone), the informer lists
// again and reports only what changed. Failures are retried with capped,
// jittered exponential backoff, logged once per attempt, and reported by
// Err until the next success.
//
// The zero Informer is not usable: get one from InformerFor. Most callers
// want Get/List after WaitForSync, and AddHandler. Every method is safe for
// concurrent use. The informer is the store's only writer: objects returned
// by Get, List, ByIndex and events are shared by every reader and must not be
// modified (deepCopy them first); they may be stale.
type Informer[T any] struct {
	res          Resource
	client       *Client[T]
	scope        Scope
	transform    func(obj *T) // applied to each object before it is stored
	resync       time.Duration
	log          *slog.Logger
	watchTimeout func() time.Duration

	mu sync.RWMutex
	// store, watches and handlers change only under mu, and events are queued
	// to handlers under mu, so every handler sees the store's changes in the
	// order they were made.
	store    *store[T]
	watches  []*watchState // one per namespace in scope, or one for all
	handlers []*handler[T]
	progress chan struct{} // closed and cleared on any progress; nil when nobody waits
	// ctx is the run's context, kept to start the goroutines of handlers
	// added while running; nil before run.
	ctx     context.Context
	stopped bool
	wg      sync.WaitGroup // the run's goroutines
}

// watchState is one list/watch: a namespace, or "" for all of them.
// Guarded by the Informer's mu.
type watchState struct {
	namespace string
	rv        string // the newest resourceVersion applied (from a list, an event or a bookmark)
	synced    bool   // the first list has been applied
	err       error  // the last failure; nil after a success
}

// HasSynced reports whether the first list of every namespace in scope has
// been stored.
func (i *Informer[T]) HasSynced() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.syncedLocked()
}

func (i *Informer[T]) syncedLocked() bool {
	for _, w := range i.watches {
		if !w.synced {
			return false
		}
	}
	return true
}

// WaitForSync returns nil once HasSynced. If ctx ends first, its error says
// why the informer is not synced (e.g. not installed, forbidden).
func (i *Informer[T]) WaitForSync(ctx context.Context) error {
	return i.wait(ctx, "sync", i.syncedLocked)
}

// WaitForResourceVersion returns once every list/watch of the informer has
// applied resourceVersion rv or a newer one: a read after it sees a write that
// returned rv. A quiet scope advances only with the server's bookmarks (about
// once a minute), so bound ctx.
func (i *Informer[T]) WaitForResourceVersion(ctx context.Context, rv string) error {
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return fmt.Errorf("kctl: cannot wait for resourceVersion %q of %s: %w", rv, i.res, err)
	}
	return i.wait(ctx, "reach resourceVersion "+rv, func() bool {
		for _, w := range i.watches {
			if !w.synced || !rvAtLeast(w.rv, rv) {
				return false
			}
		}
		return i.syncedLocked()
	})
}

// waitForWrite returns once the cache reflects obj, the server's answer to a
// write, or something newer (read-your-writes for kctl.go). Unlike
// WaitForResourceVersion it looks only at obj's namespace and at obj itself,
// and returns at once for an object the scope can never hold.
func (i *Informer[T]) waitForWrite(ctx context.Context, obj metav1.Object) error {
	rv, ns, name := obj.GetResourceVersion(), obj.GetNamespace(), obj.GetName()
	var w *watchState
	for _, x := range i.watches {
		if x.namespace == "" || x.namespace == ns {
			w = x
		}
	}
	if w == nil {
		return nil
	}
	outside := i.scope.Labels != nil && !i.scope.Labels.Matches(labels.Set(obj.GetLabels()))
	return i.wait(ctx, "reach resourceVersion "+rv+" of "+ns+"/"+name, func() bool {
		if !w.synced {
			return false
		}
		if cur, ok := i.store.get(ns, name); ok {
			return rvAtLeast(metaOf(cur).GetResourceVersion(), rv) || rvAtLeast(w.rv, rv)
		}
		return outside || rvAtLeast(w.rv, rv)
	})
}

// Err is nil while the informer is synced and healthy; otherwise it says
// what it waits for, e.g. an error matching ErrNotInstalled, or Forbidden.
// Readiness checks show it.
func (i *Informer[T]) Err() error {
	i.mu.RLock()
	defer i.mu.RUnlock()
	switch err := i.failureLocked(); {
	case err != nil:
		return err
	case i.ctx == nil:
		return fmt.Errorf("kctl: cache of %s is not started: start the Cache", i.res)
	case i.stopped:
		return fmt.Errorf("kctl: cache of %s is stopped", i.res)
	case !i.syncedLocked():
		return fmt.Errorf("kctl: cache of %s is still syncing", i.res)
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

// wait returns once doneLocked (called under mu) is true, or with an error
// naming what the informer waits for when ctx ends or the informer stops.
func (i *Informer[T]) wait(ctx context.Context, what string, doneLocked func() bool) error {
	for {
		i.mu.Lock()
		if doneLocked() {
			i.mu.Unlock()
			return nil
		}
		if i.stopped {
			i.mu.Unlock()
			return fmt.Errorf("kctl: cache of %s stopped before it could %s", i.res, what)
		}
		if i.progress == nil {
			i.progress = make(chan struct{})
		}
		progress, failure := i.progress, i.failureLocked()
		i.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			if failure != nil {
				return fmt.Errorf("kctl: cache of %s did not %s: %w (%w)", i.res, what, failure, ctx.Err())
			}
			return fmt.Errorf("kctl: cache of %s did not %s: %w", i.res, what, ctx.Err())
		}
	}
}

func (i *Informer[T]) notifyLocked() {
	if i.progress != nil {
		close(i.progress)
		i.progress = nil
	}
}

// run runs the informer until ctx ends, then waits for its goroutines.
func (i *Informer[T]) run(ctx context.Context) {
	i.mu.Lock()
	if i.ctx != nil {
		i.mu.Unlock()
		return
	}
	i.ctx = ctx
	for _, h := range i.handlers {
		i.wg.Go(func() { h.run(ctx) })
	}
	for _, w := range i.watches {
		i.wg.Go(func() { i.listWatch(ctx, w) })
	}
	if i.resync > 0 {
		i.wg.Go(func() { i.resyncEvery(ctx, i.resync) })
	}
	i.mu.Unlock()
	<-ctx.Done()
	i.mu.Lock()
	i.stopped = true // no goroutine is added to wg after this
	i.notifyLocked()
	i.mu.Unlock()
	i.wg.Wait()
}

const (
	cachePageSize         = 500
	firstRetryDelay       = 200 * time.Millisecond
	maxRetryDelay         = 30 * time.Second
	notInstalledPollDelay = 10 * time.Second // the longest wait for a CRD to appear
	healthyWatch          = 10 * time.Second // a watch open this long resets the backoff
)

// listWatch keeps the store equal to the server's objects in w's namespace
// until ctx ends: list, then watch from the newest resourceVersion, again and
// again; list again only when that resourceVersion is gone.
func (i *Informer[T]) listWatch(ctx context.Context, w *watchState) {
	fails, relist := 0, true
	for ctx.Err() == nil {
		if relist {
			objs, rv, err := i.listAll(ctx, w.namespace)
			if err != nil {
				fails++
				i.retry(ctx, w, "list", err, fails)
				continue
			}
			i.replace(w, objs, rv)
			relist = false
		}
		start := time.Now()
		err := i.watchOnce(ctx, w)
		if ctx.Err() != nil {
			return
		}
		healthy := time.Since(start) >= healthyWatch
		if healthy {
			fails = 0
		}
		switch {
		case err == nil && healthy:
			continue // the server ended the watch at its timeout
		case err == nil:
			err = errors.New("the server closed the watch early")
		case isGone(err), isNotInstalled(err):
			relist = true
		}
		fails++
		i.retry(ctx, w, "watch", err, fails)
	}
}

// listAll lists every object in namespace ("" means all) in pages, so the
// response buffer stays small, and prepares each for the store.
func (i *Informer[T]) listAll(ctx context.Context, namespace string) ([]*T, string, error) {
	var all []*T
	next := ""
	for {
		page, meta, err := i.client.listPage(ctx, i.listOptions(namespace), "", cachePageSize, next)
		if err != nil {
			return nil, "", err
		}
		if all == nil && meta.RemainingItemCount != nil {
			all = make([]*T, 0, len(page)+int(*meta.RemainingItemCount))
		}
		for _, obj := range page {
			i.transform(obj)
			all = append(all, obj)
		}
		if meta.Continue == "" {
			return all, meta.ResourceVersion, nil
		}
		next = meta.Continue
	}
}

func (i *Informer[T]) listOptions(namespace string) ListOptions {
	return ListOptions{Namespace: namespace, Labels: i.scope.Labels, Fields: i.scope.Fields}
}

// replace stores a list's result and tells the handlers what changed.
func (i *Informer[T]) replace(w *watchState, objs []*T, rv string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	initial := !w.synced
	i.store.replace(w.namespace, objs, func(t EventType, obj, old *T) {
		i.emitLocked(Event[T]{Type: t, Object: obj, Old: old, Initial: initial, Relisted: !initial})
	})
	w.rv, w.synced, w.err = rv, true, nil
	i.notifyLocked()
}

// watchOnce watches from w.rv and applies each event until the stream ends:
// nil when the server ended it cleanly.
func (i *Informer[T]) watchOnce(ctx context.Context, w *watchState) error {
	i.mu.RLock()
	rv := w.rv
	i.mu.RUnlock()
	stream, err := i.client.watch(ctx, i.listOptions(w.namespace), rv, i.watchTimeout())
	if err != nil {
		return err
	}
	defer stream.Close()
	i.mu.Lock()
	w.err = nil
	i.notifyLocked()
	i.mu.Unlock()
	for {
		e, err := stream.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := i.apply(w, e); err != nil {
			return err
		}
	}
}

// apply stores one watch event and tells the handlers; an ERROR event
// becomes the returned error. Undecodable objects and unknown events are
// logged and skipped.
func (i *Informer[T]) apply(w *watchState, e watchEvent[T]) error {
	switch {
	case e.Type == "ERROR" && e.Status != nil:
		return &apierrors.StatusError{ErrStatus: *e.Status}
	case e.Err != nil:
		i.log.Warn("kctl: cache skipped an object it could not decode", "resource", i.res.String(), "event", e.Type, "err", e.Err)
		return nil
	case e.Object == nil || e.Type != "BOOKMARK" && metaOf(e.Object).GetName() == "" ||
		!slices.Contains([]string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}, e.Type):
		i.log.Warn("kctl: cache skipped a malformed watch event", "resource", i.res.String(), "event", e.Type)
		return nil
	}
	obj := e.Object
	m := metaOf(obj)
	if e.Type != "BOOKMARK" {
		i.transform(obj)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	old, had := i.store.get(m.GetNamespace(), m.GetName())
	switch {
	case e.Type == "BOOKMARK":
	case e.Type == "DELETED":
		if had {
			i.store.remove(m.GetNamespace(), m.GetName())
			i.emitLocked(Event[T]{Type: Deleted, Object: obj})
		}
	case !had:
		i.store.put(obj)
		i.emitLocked(Event[T]{Type: Added, Object: obj})
	case metaOf(old).GetResourceVersion() != m.GetResourceVersion():
		i.store.put(obj)
		i.emitLocked(Event[T]{Type: Updated, Object: obj, Old: old})
	}
	if rv := m.GetResourceVersion(); rv != "" {
		w.rv = rv
	}
	i.notifyLocked()
	return nil
}

// retry records that op (list or watch) failed, logs it, and waits out the
// backoff for the n-th failure in a row.
func (i *Informer[T]) retry(ctx context.Context, w *watchState, op string, err error, n int) {
	limit := maxRetryDelay
	if isNotInstalled(err) {
		limit = notInstalledPollDelay
	}
	var after time.Duration
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		after = time.Duration(s) * time.Second
	}
	d := retryDelay(n, limit, rand.Float64(), after)
	where := ""
	if w.namespace != "" {
		where = " in namespace " + w.namespace
	}
	i.mu.Lock()
	was := w.err
	w.err = fmt.Errorf("kctl: %s %s%s: %w", op, i.res, where, err)
	i.notifyLocked()
	i.mu.Unlock()
	level := slog.LevelWarn
	if isNotInstalled(err) && was != nil && isNotInstalled(was) {
		level = slog.LevelDebug // said once; the poll goes on quietly
	}
	i.log.Log(ctx, level, "kctl: cache "+op+" failed, retrying", "resource", i.res.String(),
		"namespace", w.namespace, "retryIn", d.Round(time.Millisecond), "failures", n, "err", err)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// retryDelay is the wait before retry n (1, 2, ...): 200ms doubling up to
// limit, less a random part of up to half (r in [0, 1)), and never shorter
// than the server's Retry-After.
func retryDelay(n int, limit time.Duration, r float64, retryAfter time.Duration) time.Duration {
	d := limit
	if n < 30 && firstRetryDelay<<(n-1) < limit {
		d = firstRetryDelay << (n - 1)
	}
	d -= time.Duration(r * float64(d) / 2)
	return max(d, retryAfter)
}

// isGone reports whether the resourceVersion a list or watch continued from
// is no longer available, so the informer must list again.
func isGone(err error) bool {
	var s apierrors.APIStatus
	return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) ||
		errors.As(err, &s) && s.Status().Code == 410 ||
		strings.Contains(err.Error(), "too old resource version")
}

// isNotInstalled reports whether the resource does not exist on the server (its CRD is missing).
func isNotInstalled(err error) bool {
	return errors.Is(err, ErrNotInstalled) || apierrors.IsNotFound(err)
}

// rvAtLeast reports whether resourceVersion have is rv or newer.
func rvAtLeast(have, rv string) bool {
	c, err := resourceversion.CompareResourceVersion(have, rv)
	return err == nil && c >= 0 || have == rv
}

// resyncEvery re-delivers every object as an Updated event with Resync set, every d.
func (i *Informer[T]) resyncEvery(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i.mu.Lock()
		if len(i.handlers) > 0 && i.syncedLocked() {
			for _, obj := range i.store.list("", nil) {
				i.emitLocked(Event[T]{Type: Updated, Object: obj, Old: obj, Resync: true})
			}
		}
		i.mu.Unlock()
	}
}

// Cache is the set of informers one Manager shares: one Informer per
// resource, with the scope configured for its type, made on first use by
// InformerFor (a controller) or a cached client read.
//
//	cache := kctl.NewCache(conn, kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{"team-a"}}})
//	kctl.ScopeFor[corev1.Secret](cache, kctl.Scope{Labels: labels.SelectorFromSet(labels.Set{"app": "web"})})
//	go cache.Start(ctx)
//	pods, err := kctl.InformerFor[corev1.Pod](cache)
//
// The zero Cache is not usable: call NewCache, which starts nothing. Start
// runs the informers made so far and any made later. Safe for concurrent use.
type Cache struct {
	conn *Conn
	opts CacheOptions

	mu         sync.Mutex
	scopes     map[Resource]Scope
	transforms map[Resource]any // func(*T) for the resource's type T
	informers  map[Resource]interface{ run(ctx context.Context) }
	ctx        context.Context // Start's context; nil before Start
	stopped    bool            // Start's ctx ended: no goroutine is added to wg after this
	wg         sync.WaitGroup
}

// CacheOptions configures a Cache. The zero value caches every object of a
// type, without managedFields, with no resync.
type CacheOptions struct {
	// DefaultScope scopes every type without a ScopeFor. Its Namespaces are
	// ignored for cluster-scoped types. Defaults to everything.
	DefaultScope Scope
	// KeepManagedFields keeps metadata.managedFields, which the cache drops by
	// default: few controllers read them and they are often a third of an object.
	KeepManagedFields bool
	// Resync, when positive, re-delivers every object to the handlers as an
	// Updated event with Resync set, every Resync. Defaults to never.
	Resync time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Scope selects which objects of a type the cache holds. The zero Scope is
// every object in the cluster.
type Scope struct {
	// Namespaces, if any, are watched one by one into the same store.
	Namespaces []string
	Labels     labels.Selector // nil: every label
	Fields     string          // a field selector evaluated by the server, e.g. "spec.nodeName=node-1"
}

// NewCache returns a Cache reading through conn. It starts nothing.
func NewCache(conn *Conn, opts CacheOptions) *Cache {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Cache{conn: conn, opts: opts, scopes: map[Resource]Scope{}, transforms: map[Resource]any{},
		informers: map[Resource]interface{ run(ctx context.Context) }{}}
}

// Start runs the informers until ctx ends, including those made after Start,
// then waits for all of their goroutines and returns nil. Run it in its own
// goroutine; call it once.
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

// ScopeFor sets the scope of T's informer. Call it before T's informer is made.
func ScopeFor[T any, PT Object[T]](c *Cache, s Scope) error {
	return configure[T](c, func(res Resource) { c.scopes[res] = s })
}

// TransformFor sets a function that changes each of T's objects before it is
// stored (after managedFields are dropped), e.g. to clear fields nobody
// reads. fn owns the object it is given. Call it before T's informer is made.
func TransformFor[T any, PT Object[T]](c *Cache, fn func(obj *T)) error {
	return configure[T](c, func(res Resource) { c.transforms[res] = fn })
}

func configure[T any](c *Cache, set func(res Resource)) error {
	res, err := ResourceOf[T]()
	if err != nil {
		return fmt.Errorf("kctl: cannot configure the cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.informers[res]; ok {
		return fmt.Errorf("kctl: the cache of %s is already made: configure it before its first use", res)
	}
	set(res)
	return nil
}

// InformerFor returns T's informer in c, making it with T's scope on first
// use; it runs once c is started.
func InformerFor[T any, PT Object[T]](c *Cache) (*Informer[T], error) {
	return informerFor[T, PT](c, false)
}

// readInformer is InformerFor for a cached client read: it warns when the
// read makes an informer for every object of a type nobody scoped, a
// frequent cause of surprise memory use.
func readInformer[T any, PT Object[T]](c *Cache) (*Informer[T], error) {
	return informerFor[T, PT](c, true)
}

func informerFor[T any, PT Object[T]](c *Cache, read bool) (*Informer[T], error) {
	res, err := ResourceOf[T]()
	if err != nil {
		return nil, fmt.Errorf("kctl: cannot cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.informers[res]; ok {
		typed, ok := inf.(*Informer[T])
		if !ok {
			return nil, fmt.Errorf("kctl: %s is cached as another Go type (%T): use one Go type per resource", res, inf)
		}
		return typed, nil
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
	transform, _ := c.transforms[res].(func(*T))
	inf := newInformer(NewClient[T, PT](c.conn), res, scope, transform, c.opts)
	c.informers[res] = inf
	if c.ctx != nil {
		ctx := c.ctx
		c.wg.Go(func() { inf.run(ctx) })
	}
	return inf, nil
}

func newInformer[T any](client *Client[T], res Resource, scope Scope, transform func(*T), opts CacheOptions) *Informer[T] {
	i := &Informer[T]{res: res, client: client, scope: scope, resync: opts.Resync, log: opts.Logger,
		store: newStore[T](), watchTimeout: func() time.Duration { return 5*time.Minute + rand.N(5*time.Minute) }}
	i.transform = func(obj *T) {
		if !opts.KeepManagedFields {
			metaOf(obj).SetManagedFields(nil)
		}
		if transform != nil {
			transform(obj)
		}
	}
	namespaces := slices.Compact(slices.Sorted(slices.Values(scope.Namespaces)))
	if !res.Namespaced || len(namespaces) == 0 || slices.Contains(namespaces, "") {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		i.watches = append(i.watches, &watchState{namespace: ns})
	}
	return i
}

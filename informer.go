package kctl

// Informer[T]: its state, and its read side: Get, List and WaitForSync,
// all reading the store (store.go) under the informer's lock.
// list_watch.go and apply.go are its write side; its own indexes
// (AddIndex, ByIndex) are cache_options.go's, and its T-typed Get, List
// and AddHandler, which floor 1 never calls (it calls the core's), and
// what it tells beyond the data path (Stats, Undecodable,
// WaitForResourceVersion) are informer_more.go's.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/index"
	"github.com/kctl-dev/kctl/internal/mailbox"
	"github.com/kctl-dev/kctl/internal/progress"
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
// Model: list, then watch with bookmarks, resuming from the newest
// resourceVersion seen; a watch lasts 5 to 10 minutes at random, and the
// client ends one that overstays that by 10% (at most 30 s) plus 1 s. The
// list is the watch-list stream (every object as an event, then the
// changes, in one request: watch_list.go), or where the server refuses
// that, pages of 500 and a watch (list_watch.go). When that resourceVersion is gone
// (410), list again and report only what changed. An object that stops decoding into T keeps its last good copy
// until it decodes again or is deleted (see Undecodable). Failures are
// logged, reported by Err and retried after 200ms doubling up to 30s (10s
// for a missing CRD), less up to half at random, at least the server's
// Retry-After; a watch open for 10s resets the backoff. A periodic
// resync (ResyncFor) is spread over the first half of its period.
//
// The zero Informer is unusable: get one from InformerFor. Most callers want
// AddHandler, WaitForSync, then Get or List. Safe for concurrent use. The
// informer is the store's only writer: objects from reads and events are
// shared, must not be modified (deepCopy first), and may be stale. Stored
// objects also share equal strings, string maps and resource lists with
// each other (internal/share): the Pods of one workload hold one copy of
// their labels, image and requests, which more than halves a Pod's memory
// in the cache.
//
// Its methods are those of its core, informer[P] over P = *T, compiled once
// for every T (see typeOps); those that name T are thin methods here.
type Informer[T any] struct {
	informer[*T]
}

// informer is an Informer[T]'s state and work, over P = *T: compiled once
// for every T (see typeOps).
type informer[P any] struct {
	res Resource
	// name is res.String(), made once: read-your-writes looks up the
	// pending writes by it on every cached read and reconcile.
	name   string
	client *client[P]
	// transform readies a decoded object for the store.
	transform func(obj P)
	// sharer then makes it share equal parts with stored objects.
	sharer *share.Sharer
	// resync, if set, re-delivers the stored objects periodically until
	// run's ctx ends: cache_options.go's resyncEvery (resyncBy says where
	// and how often). nil: never. Called in one place, run.
	resync func(ctx context.Context)
	// healthy is how long a watch must stay open to reset the backoff:
	// healthyWatch, shorter in tests.
	healthy time.Duration
	// watchFor is how long a watch asks to last: 0 means 5 to 10
	// minutes at random; set in tests.
	watchFor time.Duration
	log      *slog.Logger
	// stream, if set, lists and watches in one request (watch_list.go):
	// it stores the list, says so, and follows the changes as watchOnce
	// does; or returns errPaged at once where the server does not serve
	// it: list in pages. nil: always in pages. Called once, in listWatch.
	stream func(ctx context.Context, w *watchState) (synced bool, err error)

	// mu guards what follows. The store changes, and events are queued to
	// handlers, only under mu: every handler sees the changes in store order.
	mu sync.RWMutex
	// shard is the shard selector (ListOptions.ShardSelector) that begin
	// gives each list and watch, "" for all. Sharding sets it; its reshard
	// then makes every watch list again, the objects the new selector
	// leaves out leaving as Deleted events (shard.go).
	shard string
	store *store[P]
	// watches has one per namespace in scope, or one for all.
	watches  []*watchState
	handlers []*handler[P]
	// progress wakes the waiters (wait) on any progress.
	progress progress.Signal
	// ctx is run's; nil before run.
	ctx context.Context
	// stopped means run's ctx ended: no goroutine is added to wg after this.
	stopped bool
	wg      sync.WaitGroup
}

// watchState is one list/watch. Only its listWatch goroutine changes it,
// under mu.
type watchState struct {
	// opts holds a namespace ("" for all) and the scope's selectors.
	opts ListOptions
	// rv is the newest resourceVersion applied.
	rv string
	// synced means the first list is stored.
	synced bool
	// err is the last failure; nil after a success.
	err error
	// shard is the shard selector of the current list or watch.
	shard string
	// listed is the shard selector of the list stored last.
	listed string
	// reshard: the selector changed, list again (see Informer.reshard).
	reshard bool
	// cancel ends the current list or watch; nil before the first.
	cancel context.CancelFunc
}

// String is "cache of <resource>", e.g. "cache of pods/v1".
func (i *informer[P]) String() string { return "cache of " + i.name }

// HasSynced reports whether the first list of every namespace in scope is stored.
func (i *informer[P]) HasSynced() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.syncedLocked()
}

func (i *informer[P]) syncedLocked() bool {
	return !slices.ContainsFunc(i.watches, func(w *watchState) bool { return !w.synced })
}

// WaitForSync returns nil once HasSynced. If ctx ends first, its error says
// why the informer is not synced (e.g. not installed, forbidden).
func (i *informer[P]) WaitForSync(ctx context.Context) error {
	return i.wait(ctx, "sync", i.syncedLocked)
}

// Err is nil while the informer is synced and healthy, else it says what it
// waits for, e.g. an error matching ErrNotInstalled. For readiness checks
// (the texts: internal/progress).
func (i *informer[P]) Err() error {
	i.mu.RLock()
	defer i.mu.RUnlock()
	err := i.failureLocked()
	started := i.ctx != nil
	synced := i.syncedLocked()
	return progress.Err(i.String(), err, started, i.stopped, synced)
}

func (i *informer[P]) failureLocked() error {
	for _, w := range i.watches {
		if w.err != nil {
			return w.err
		}
	}
	return nil
}

// goLocked runs fn(run's ctx) in a goroutine, if the informer runs.
func (i *informer[P]) goLocked(fn func(ctx context.Context)) {
	ctx := i.ctx
	if ctx == nil || i.stopped {
		return
	}
	i.wg.Go(func() { fn(ctx) })
}

// notifyLocked wakes the waiters (wait) to look again.
func (i *informer[P]) notifyLocked() { i.progress.Notify() }

// addHandler is AddHandler (informer_more.go) in the core: a handler
// added after objects were stored first gets them as Initial Added events.
func (i *informer[P]) addHandler(fn func(event[P])) {
	h := &handler[P]{fn: fn, box: mailbox.New[event[P]]()}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, obj := range i.store.all() {
		h.push(event[P]{Type: Added, Object: obj, Initial: true})
	}
	i.handlers = append(i.handlers, h)
	i.goLocked(h.run)
}

func (i *informer[P]) emitLocked(e event[P]) {
	for _, h := range i.handlers {
		h.push(e)
	}
}

// Get is Informer.Get in the core.
func (i *informer[P]) Get(namespace, name string) (P, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.get(namespace, name)
}

// List is Informer.List in the core.
func (i *informer[P]) List(opts ListOptions) ([]P, error) {
	i.mu.RLock()
	out, missing, err := i.listLocked(opts)
	i.mu.RUnlock()
	if missing == "" || err != nil {
		return out, err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	// Asked again under the write lock: another List may have filled the room.
	out, missing, err = i.listLocked(opts)
	for missing != "" && err == nil {
		i.store.labelIndex(missing)
		out, missing, err = i.listLocked(opts)
	}
	return out, err
}

// listLocked is one try of List, with mu held (read or write).
func (i *informer[P]) listLocked(
	opts ListOptions,
) (out []P, missing string, err error) {
	scope := ""
	if len(i.watches) > 0 {
		// Every watch has the scope's.
		scope = i.watches[0].opts.Fields
	}
	sel := opts.Fields
	fields, unknown, err := i.store.indexes.Fields(sel, scope)
	if err == nil && len(unknown) > 0 {
		custom := !i.client.codec.builtin
		g, k := i.res.Group, i.res.Kind
		err = index.Unindexed(g, k, i.name, custom, sel, scope, unknown)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w (%s)", err, i)
	}
	out, missing = i.store.list(opts.Namespace, opts.Labels, fields)
	return out, missing, nil
}

// wait returns once doneLocked (called under mu) holds, or with an error
// saying why not when ctx ends or the informer stops (internal/progress).
func (i *informer[P]) wait(
	ctx context.Context,
	what string,
	doneLocked func() bool,
) error {
	state := func() (done, stopped bool, failure error) {
		return doneLocked(), i.stopped, i.failureLocked()
	}
	name := i.String()
	return progress.Wait(ctx, &i.mu, &i.progress, name, what, state)
}

func (i *informer[P]) resource() Resource { return i.res }

package kctl

// Floor 2: read your writes, the Cache's read barrier (Cache.barrier):
// cached reads, and a controller's next reconcile, wait until the cache
// holds this Manager's own writes (see below).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/nscover"
	"github.com/kctl-dev/kctl/internal/pendingwrites"
	"github.com/kctl-dev/kctl/internal/scope"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Read your writes. A Manager remembers every write its Clients make (those
// of ClientFor, and a controller's finalizer patches) to an object of a type
// its cache holds, until the cache has caught up with it. Until then a
// cached read that could see that object waits for it:
//
//   - Get of the object waits until the cache holds the write or a newer
//     version (for a delete: no longer holds the deleted object);
//   - List of its namespace (or of every namespace) waits for every such
//     write in that namespace;
//   - a controller's next reconcile of the object's key waits the same way
//     before it reads the object.
//
// So a reconcile that creates a child and lists the children sees it, and a
// reconcile that starts after a write of its object starts from that write,
// whichever worker or controller made the write. Each wait is bounded by
// readYourWritesTimeout (10 s); past it the read fails with an error naming
// the write (the cache is then far behind the server, e.g. its watch is
// broken, and is reported by /readyz and the cache's logs).
//
// What it does not cover: writes made with NewClient (nobody told the
// Manager; Uncached() of a ClientFor client does tell it), DeleteAllOf,
// writes made before the type's first cached read or controller (a cache
// made then lists after them anyway), and objects the cache does not hold: outside the
// type's namespaces or label selector, or any object of a type scoped with a
// field selector (kctl cannot evaluate it).
//
// On a member of a shard group (Manager.Shard) the same holds for the
// namespaced objects of the ranges the member serves, once its caches
// have listed their namespace (a namespace created in a served range is
// covered once the caches have listed it again, within a RenewPeriod).
// Not covered there: a write to an object in another namespace (a range
// another member serves: this member's cache never holds it, so a
// cached read does not wait for it and does not see it), a write made
// while the member serves no range (before it joined, after it lost its
// Lease), and a write whose range moves away before the cache has it
// (the read no longer waits once the member stops serving the range).
// Cluster-scoped types are cached whole on every member: covered as
// without sharding.
const readYourWritesTimeout = 10 * time.Second

// writeTracker is a Manager's read-your-writes: the writes its caches
// have not caught up with (internal/pendingwrites), by resource, and how
// long a read waits for them.
type writeTracker struct {
	pending *pendingwrites.Tracker
	// timeout bounds a read's wait: readYourWritesTimeout, shorter in tests.
	timeout time.Duration
	// covers, by resource (a Resource's String), are the namespaces a
	// shard member's caches hold of the resources they split (shardBy).
	covers nscover.Set
}

func newWriteTracker() *writeTracker {
	t := pendingwrites.New()
	return &writeTracker{pending: t, timeout: readYourWritesTimeout}
}

// record remembers obj, as a write of res returned it.
func (w *writeTracker) record(res Resource, obj metav1.Object) {
	w.pending.Record(res.String(), obj)
}

// recordDelete remembers the deletion of namespace/name (uid) of res.
func (w *writeTracker) recordDelete(
	res Resource,
	namespace, name string,
	uid types.UID,
) {
	r := res.String()
	w.pending.RecordDelete(r, namespace, name, uid)
}

// shardBy makes read-your-writes of res wait only for writes to
// objects whose namespace covers takes in: res's cache is a shard
// member's share (shardRun.covers). Call it before the informer runs;
// a write recorded before that whose namespace covers does not take in
// is not waited for (wait checks again).
func (w *writeTracker) shardBy(res Resource, covers func(namespace string) bool) {
	w.covers.Split(res.String(), covers)
}

// trackable is what read-your-writes needs of an informer of any T.
// Every informer is one: trackedBy and waitForWrite are below. They are
// two methods, each too big to be inlined, so that the method wrappers of
// each Informer[T] and informer[*T] call them rather than copy them
// (bench/typecost).
type trackable interface {
	cachedInformer
	// trackedBy is track for this informer.
	trackedBy(w *writeTracker)
	// waitForWrite waits until the cache holds wr, the write of
	// namespace/name: gone if it deleted, else at its rv or newer.
	waitForWrite(ctx context.Context, namespace, name string, wr pendingwrites.Write) error
}

// track starts read-your-writes for inf's resource; a Manager's cache
// calls it for each informer it makes. Calling it again does nothing.
//
// A write is remembered if the informer's scope takes its object in and,
// for a shard member's share, the member covers its namespace. An object
// that leaves the cache because its namespace is no longer covered (a
// range the member drained) ends its write: the cache will not see it.
func (w *writeTracker) track(made cachedInformer) {
	inf, ok := made.(trackable)
	if ok { // else not an informer of this package
		inf.trackedBy(w)
	}
}

// trackedBy is writeTracker.track of i.
func (i *informer[P]) trackedBy(w *writeTracker) {
	res := i.name
	holds := func(obj metav1.Object) bool {
		return i.holds(obj) && w.covers.Covered(res, obj.GetNamespace())
	}
	if !w.pending.Track(res, holds) {
		return
	}
	i.onChange(func(obj metav1.Object, deleted bool) {
		ns := obj.GetNamespace()
		if deleted && !w.covers.Covered(res, ns) {
			w.pending.Forget(res, ns, obj.GetName())
			return
		}
		w.pending.CaughtUp(res, obj, deleted)
	})
}

// wait is the Cache's read barrier: it waits, at most w.timeout, until
// inf has caught up with every write of w to namespace/name (see
// pendingwrites.Tracker.In).
func (w *writeTracker) wait(
	ctx context.Context,
	cached cachedInformer,
	namespace, name string,
) error {
	inf, ok := cached.(trackable)
	if !ok {
		return nil // not an informer of this package
	}
	res := inf.resource()
	r := res.String()
	writes := w.pending.In(r, namespace, name)
	if len(writes) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	for k, wr := range writes {
		if !w.covers.Covered(r, k.Namespace) {
			// The member no longer serves its range: it will not come.
			w.pending.Forget(r, k.Namespace, k.Name)
			continue
		}
		err := inf.waitForWrite(ctx, k.Namespace, k.Name, wr)
		if err != nil {
			return fmt.Errorf("kctl: a cached read of %s waited %v "+
				"for the cache to catch up with this Manager's write of %s: %w",
				res, w.timeout, k, unprefixed(err))
		}
	}
	return nil
}

// waitForWrite (read-your-writes) returns once the cache holds wr, the
// write of namespace/name: gone if it deleted, else at its rv or newer.
func (i *informer[P]) waitForWrite(
	ctx context.Context,
	namespace, name string,
	wr pendingwrites.Write,
) error {
	if wr.Deleted {
		return i.waitForGone(ctx, namespace, name, wr.UID)
	}
	return i.waitForObject(ctx, namespace, name, wr.RV)
}

// waitForGone (read-your-writes of a delete) returns once the cache holds
// no object namespace/name of uid.
func (i *informer[P]) waitForGone(
	ctx context.Context,
	namespace, name string,
	uid types.UID,
) error {
	what := "drop deleted " + nsKey(namespace, name)
	return i.wait(ctx, what, func() bool {
		cur, ok := i.store.get(namespace, name)
		return !ok || metaOf(cur).GetUID() != uid
	})
}

// holds reports whether i's scope takes in obj: its namespace and labels
// match one of i's list/watches, which have no field selector. A shard
// selector is not its part: read-your-writes asks the shard member
// (writeTracker.shardBy).
func (i *informer[P]) holds(obj metav1.Object) bool {
	return slices.ContainsFunc(i.watches, func(w *watchState) bool {
		// Set when the informer is made, never changed.
		o := w.opts
		return scope.Takes(o.Namespace, o.Labels, o.Fields, obj)
	})
}

// onChange calls fn with the metadata of every change i stores.
func (i *informer[P]) onChange(fn func(obj metav1.Object, deleted bool)) {
	i.addHandler(func(ev event[P]) {
		fn(metaOf(ev.Object), ev.Type == Deleted)
	})
}

package kctl

import (
	"context"
	"fmt"
	"sync"
	"time"

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
const readYourWritesTimeout = 10 * time.Second

// writeTracker holds the writes the cache has not caught up with yet.
// Invariants: a resource is in sees once its informer hands every event to
// caughtUp; pending writes are kept only for such resources, and only for
// objects that resource's cache holds (sees), so that every one of them is
// removed by an event of the cache.
type writeTracker struct {
	timeout time.Duration // how long a read waits: readYourWritesTimeout, shorter in tests

	mu      sync.Mutex
	sees    map[Resource]func(metav1.Object) bool // the tracked resources: whether their cache holds an object
	pending map[Resource]map[Key]write            // by object; removed by caughtUp
}

// write is one write the cache has not caught up with: it has once the
// cache holds resourceVersion rv or newer of the object, or, for a delete
// (deleted set), once it no longer holds the object with uid.
type write struct {
	rv      string
	uid     types.UID
	deleted bool
}

func newWriteTracker() *writeTracker {
	return &writeTracker{timeout: readYourWritesTimeout, sees: map[Resource]func(metav1.Object) bool{}, pending: map[Resource]map[Key]write{}}
}

// trackable is what the tracker needs of an informer of any type.
type trackable interface {
	resource() Resource
	// holds reports whether the informer's scope takes in obj.
	holds(obj metav1.Object) bool
	// onChange calls fn with every change the informer stores.
	onChange(fn func(obj metav1.Object, deleted bool))
}

// track starts read-your-writes for inf's resource; a Manager's cache
// calls it for each informer it makes. Calling it again does nothing.
func (w *writeTracker) track(inf trackable) {
	res := inf.resource()
	w.mu.Lock()
	_, tracked := w.sees[res]
	if !tracked {
		w.sees[res] = inf.holds
	}
	w.mu.Unlock()
	if tracked {
		return
	}
	inf.onChange(func(obj metav1.Object, deleted bool) {
		w.caughtUp(res, obj, deleted)
	})
}

// record remembers obj, as a write returned it, if its resource is tracked
// and its cache holds obj.
func (w *writeTracker) record(res Resource, obj metav1.Object) {
	w.add(res, obj, write{rv: obj.GetResourceVersion()})
}

// recordDelete remembers the deletion of the object namespace/name with uid.
func (w *writeTracker) recordDelete(res Resource, namespace, name string, uid types.UID) {
	obj := &metav1.ObjectMeta{Namespace: namespace, Name: name}
	w.add(res, obj, write{uid: uid, deleted: true})
}

func (w *writeTracker) add(res Resource, obj metav1.Object, wr write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sees, tracked := w.sees[res]
	if !tracked || !sees(obj) {
		return
	}
	k := Key{obj.GetNamespace(), obj.GetName()}
	byKey := w.pending[res]
	if byKey == nil {
		byKey = map[Key]write{}
		w.pending[res] = byKey
	}
	if prev, ok := byKey[k]; ok && !prev.deleted && !wr.deleted && olderRV(wr.rv, prev.rv) {
		return // two writes raced: keep the newer
	}
	byKey[k] = wr
}

// caughtUp forgets the write of obj once the cache has it: obj is the
// cache's version of it, just stored (or just removed, if deleted).
func (w *writeTracker) caughtUp(res Resource, obj metav1.Object, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byKey := w.pending[res]
	k := Key{obj.GetNamespace(), obj.GetName()}
	wr, ok := byKey[k]
	if !ok {
		return
	}
	if wr.deleted && (deleted || obj.GetUID() != wr.uid) || !wr.deleted && !olderRV(obj.GetResourceVersion(), wr.rv) {
		delete(byKey, k)
	}
	if len(byKey) == 0 {
		delete(w.pending, res)
	}
}

// writesIn returns the pending writes of res to namespace/name; name ""
// means every object of namespace, and namespace "" every namespace too.
func (w *writeTracker) writesIn(res Resource, namespace, name string) map[Key]write {
	w.mu.Lock()
	defer w.mu.Unlock()
	if name != "" { // a Get: one lookup
		wr, ok := w.pending[res][Key{namespace, name}]
		if !ok {
			return nil
		}
		return map[Key]write{{namespace, name}: wr}
	}
	var out map[Key]write
	for k, wr := range w.pending[res] {
		if (namespace == "" || k.Namespace == namespace) && (name == "" || k.Name == name) {
			if out == nil {
				out = map[Key]write{}
			}
			out[k] = wr
		}
	}
	return out
}

// readYourWrites waits, at most w.timeout, until inf has caught
// up with every write of w to namespace/name (see writesIn); a nil w has none.
func readYourWrites[T any](ctx context.Context, w *writeTracker, inf *Informer[T], namespace, name string) error {
	if w == nil {
		return nil
	}
	writes := w.writesIn(inf.res, namespace, name)
	if len(writes) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	for k, wr := range writes {
		var err error
		if wr.deleted {
			err = inf.wait(ctx, "drop deleted "+k.String(), func() bool {
				cur, ok := inf.store.get(k.Namespace, k.Name)
				return !ok || metaOf(cur).GetUID() != wr.uid
			})
		} else {
			err = inf.waitForObject(ctx, k.Namespace, k.Name, wr.rv)
		}
		if err != nil {
			return fmt.Errorf("kctl: a cached read of %s waited %v for the cache to catch up with this Manager's write of %s: %w",
				inf.res, w.timeout, k, unprefixed(err))
		}
	}
	return nil
}

// Package pendingwrites remembers the writes a cache has not caught up
// with yet, for kctl's read-your-writes (see kctl's readyourwrites.go):
// a write is pending from when the server answered it until the cache
// holds that version of the object (or, for a delete, no longer holds the
// object).
package pendingwrites

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Key names an object of a resource.
type Key struct{ Namespace, Name string }

// String is "namespace/name", or "name" without a namespace.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Write is one write the cache has not caught up with: it has once the
// cache holds resourceVersion RV or newer of the object, or, for a delete
// (Deleted set), once it no longer holds the object with UID.
type Write struct {
	RV      string
	UID     types.UID
	Deleted bool
}

// Tracker holds the pending writes, by resource (a kctl.Resource's
// String). Invariants: a resource is in sees once its cache hands every
// change to CaughtUp; writes are kept only for such resources, and only
// for objects that resource's cache holds (sees), so that every one of
// them is removed by a change the cache stores. The zero value is not
// usable: call New. Safe for concurrent use.
type Tracker struct {
	mu sync.Mutex
	// sees says, per tracked resource, whether its cache holds an object.
	sees map[string]func(metav1.Object) bool
	// pending holds the writes by resource and object.
	pending map[string]map[Key]Write
}

// New returns a Tracker that tracks no resource.
func New() *Tracker {
	return &Tracker{
		sees:    map[string]func(metav1.Object) bool{},
		pending: map[string]map[Key]Write{},
	}
}

// Track starts tracking res, whose cache holds the objects that holds
// takes in. It returns false if res was tracked already. The caller must
// then hand every change the cache stores to CaughtUp.
func (w *Tracker) Track(res string, holds func(metav1.Object) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.sees[res]; ok {
		return false
	}
	w.sees[res] = holds
	return true
}

// Record remembers obj, as a write returned it, if res is tracked and its
// cache holds obj.
func (w *Tracker) Record(res string, obj metav1.Object) {
	wr := Write{RV: obj.GetResourceVersion()}
	w.add(res, obj, wr)
}

// RecordDelete remembers the deletion of namespace/name with uid.
func (w *Tracker) RecordDelete(res, namespace, name string, uid types.UID) {
	obj := &metav1.ObjectMeta{Namespace: namespace, Name: name}
	w.add(res, obj, Write{UID: uid, Deleted: true})
}

func (w *Tracker) add(res string, obj metav1.Object, wr Write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sees, tracked := w.sees[res]
	if !tracked || !sees(obj) {
		return
	}
	k := Key{obj.GetNamespace(), obj.GetName()}
	byKey := w.pending[res]
	if byKey == nil {
		byKey = map[Key]Write{}
		w.pending[res] = byKey
	}
	prev, ok := byKey[k]
	updates := ok && !prev.Deleted && !wr.Deleted
	if updates && older(wr.RV, prev.RV) {
		return // two writes raced: keep the newer
	}
	byKey[k] = wr
}

// CaughtUp forgets the write of obj once the cache has it: obj is the
// cache's version of it, just stored (or just removed, if deleted).
func (w *Tracker) CaughtUp(res string, obj metav1.Object, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byKey := w.pending[res]
	k := Key{obj.GetNamespace(), obj.GetName()}
	wr, ok := byKey[k]
	if !ok {
		return
	}
	var done bool
	if wr.Deleted {
		done = deleted || obj.GetUID() != wr.UID
	} else {
		done = !older(obj.GetResourceVersion(), wr.RV)
	}
	if done {
		delete(byKey, k)
	}
	if len(byKey) == 0 {
		delete(w.pending, res)
	}
}

// Forget forgets the write of namespace/name of res, if any: the cache
// will not see it (it no longer holds the object's namespace).
func (w *Tracker) Forget(res, namespace, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	byKey := w.pending[res]
	delete(byKey, Key{namespace, name})
	if len(byKey) == 0 {
		delete(w.pending, res)
	}
}

// In returns the pending writes of res to namespace/name; name "" means
// every object of namespace, and namespace "" every namespace too.
func (w *Tracker) In(res, namespace, name string) map[Key]Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	if name != "" { // a Get: one lookup
		k := Key{namespace, name}
		wr, ok := w.pending[res][k]
		if !ok {
			return nil
		}
		return map[Key]Write{k: wr}
	}
	var out map[Key]Write
	for k, wr := range w.pending[res] {
		if namespace != "" && k.Namespace != namespace {
			continue
		}
		if out == nil {
			out = map[Key]Write{}
		}
		out[k] = wr
	}
	return out
}

// Len is the number of resources with pending writes.
func (w *Tracker) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// older reports whether resourceVersion a is older than b. Kubernetes
// resourceVersions are comparable since 1.35; unparsable ones count as
// not older.
func older(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}

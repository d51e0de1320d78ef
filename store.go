package kctl

// The informer's store and its read side: Get, List, ByIndex and indexes,
// waiting for a resourceVersion, stats, and the events handed to handlers.
// cache.go fills the store from the API server.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// store is an informer's map of objects with its indexes. It has no lock of
// its own: the Informer is its only writer and guards it (golang-lru's split
// of a lock-free core and a locking wrapper), so the diffing below is tested
// without goroutines. Stored objects are never mutated: a change replaces the
// pointer.
type store[T any] struct {
	// objects holds every object under its own namespace ("" when
	// cluster-scoped) and name. An empty inner map is removed, so the keys of
	// objects are exactly the namespaces that have objects: the namespace
	// index is built in.
	objects map[string]map[string]entry[T]
	// indexes are the user's indexes by name; each holds every stored object
	// under each value its function returns.
	indexes map[string]*index[T]
	count   int   // the number of objects
	bytes   int64 // the sum of the entry sizes measured so far (by Informer.Stats)
}

// entry is one stored object with its estimated size in bytes (0: not yet measured).
type entry[T any] struct {
	obj  *T
	size int
}

type objKey struct{ namespace, name string }

type index[T any] struct {
	fn     func(obj *T) []string // must return the same values for the same object
	values map[string]map[objKey]struct{}
}

func newStore[T any]() *store[T] {
	return &store[T]{objects: map[string]map[string]entry[T]{}, indexes: map[string]*index[T]{}}
}

func storeKey[T any](obj *T) objKey {
	m := metaOf(obj)
	return objKey{m.GetNamespace(), m.GetName()}
}

func (s *store[T]) get(namespace, name string) (*T, bool) {
	e, ok := s.objects[namespace][name]
	return e.obj, ok
}

// put adds obj or replaces the object stored under its key.
func (s *store[T]) put(obj *T) {
	k := storeKey(obj)
	inner := s.objects[k.namespace]
	if inner == nil {
		inner = map[string]entry[T]{}
		s.objects[k.namespace] = inner
	}
	old, ok := inner[k.name]
	inner[k.name] = s.track(k, old, ok, obj)
}

// remove deletes the object stored under namespace/name and returns it.
func (s *store[T]) remove(namespace, name string) (*T, bool) {
	old, ok := s.objects[namespace][name]
	if !ok {
		return nil, false
	}
	delete(s.objects[namespace], name)
	if len(s.objects[namespace]) == 0 {
		delete(s.objects, namespace)
	}
	s.track(objKey{namespace, name}, old, true, nil)
	return old.obj, true
}

// track updates the count, the bytes and the indexes for the object under k
// going from old (if had) to obj (nil: deleted), and returns obj's
// (unmeasured) entry.
func (s *store[T]) track(k objKey, old entry[T], had bool, obj *T) entry[T] {
	if had {
		s.count--
		s.bytes -= int64(old.size)
	}
	if obj != nil {
		s.count++
	}
	for _, ix := range s.indexes {
		if had {
			ix.remove(k, old.obj)
		}
		if obj != nil {
			ix.add(k, obj)
		}
	}
	return entry[T]{obj: obj}
}

// replace makes the objects in namespace ("" means every namespace) exactly
// objs, the result of a list, and reports each difference to changed: Added,
// Updated (with the old object) or Deleted (with the last stored object). An
// object whose resourceVersion did not change is kept, not replaced, and not
// reported, so a relist after a reconnect reports only what really changed.
// The new maps are sized from the list.
func (s *store[T]) replace(namespace string, objs []*T, changed func(t EventType, obj, old *T)) {
	// prev holds the namespaces being replaced; every object left in it at
	// the end was not listed, so it was deleted.
	prev := s.objects
	if namespace != "" {
		prev = map[string]map[string]entry[T]{namespace: s.objects[namespace]}
	}
	sizes := map[string]int{}
	for _, obj := range objs {
		sizes[metaOf(obj).GetNamespace()]++
	}
	next := make(map[string]map[string]entry[T], len(sizes))
	for ns, n := range sizes {
		next[ns] = make(map[string]entry[T], n)
	}
	for _, obj := range objs {
		k := storeKey(obj)
		old, had := prev[k.namespace][k.name]
		if had {
			delete(prev[k.namespace], k.name)
		}
		switch {
		case had && metaOf(old.obj).GetResourceVersion() == metaOf(obj).GetResourceVersion():
			next[k.namespace][k.name] = old
		case had:
			next[k.namespace][k.name] = s.track(k, old, true, obj)
			changed(Updated, obj, old.obj)
		default:
			next[k.namespace][k.name] = s.track(k, old, false, obj)
			changed(Added, obj, nil)
		}
	}
	for ns, inner := range prev {
		for name, old := range inner {
			s.track(objKey{ns, name}, old, true, nil)
			changed(Deleted, old.obj, nil)
		}
	}
	if namespace == "" {
		s.objects = next
		return
	}
	delete(s.objects, namespace)
	if inner := next[namespace]; len(inner) > 0 {
		s.objects[namespace] = inner
	}
}

// list returns the objects in namespace ("" means all) whose labels match sel (nil matches all).
func (s *store[T]) list(namespace string, sel labels.Selector) []*T {
	if sel != nil && sel.Empty() {
		sel = nil
	}
	var out []*T
	add := func(inner map[string]entry[T]) {
		for _, e := range inner {
			if sel == nil || sel.Matches(labels.Set(metaOf(e.obj).GetLabels())) {
				out = append(out, e.obj)
			}
		}
	}
	if namespace != "" {
		out = make([]*T, 0, len(s.objects[namespace]))
		add(s.objects[namespace])
		return out
	}
	out = make([]*T, 0, s.count)
	for _, inner := range s.objects {
		add(inner)
	}
	return out
}

// unsized returns the objects whose size is not yet measured.
func (s *store[T]) unsized() []*T {
	var out []*T
	for _, inner := range s.objects {
		for _, e := range inner {
			if e.size == 0 {
				out = append(out, e.obj)
			}
		}
	}
	return out
}

// setSize records obj's measured size if obj is still stored and unmeasured.
func (s *store[T]) setSize(obj *T, size int) {
	k := storeKey(obj)
	if e, ok := s.objects[k.namespace][k.name]; ok && e.obj == obj && e.size == 0 {
		e.size = size
		s.objects[k.namespace][k.name] = e
		s.bytes += int64(size)
	}
}

func (s *store[T]) addIndex(name string, fn func(obj *T) []string) error {
	if _, ok := s.indexes[name]; ok || fn == nil {
		return fmt.Errorf("kctl: index %q is already defined or has no function: give each index one unique name", name)
	}
	ix := &index[T]{fn: fn, values: map[string]map[objKey]struct{}{}}
	for ns, inner := range s.objects {
		for name, e := range inner {
			ix.add(objKey{ns, name}, e.obj)
		}
	}
	s.indexes[name] = ix
	return nil
}

// byIndex returns the objects the index named name files under value; nil
// for an unknown index.
func (s *store[T]) byIndex(name, value string) []*T {
	ix := s.indexes[name]
	if ix == nil {
		return nil
	}
	keys := ix.values[value]
	out := make([]*T, 0, len(keys))
	for k := range keys {
		out = append(out, s.objects[k.namespace][k.name].obj)
	}
	return out
}

func (ix *index[T]) add(k objKey, obj *T) {
	for _, v := range ix.fn(obj) {
		set := ix.values[v]
		if set == nil {
			set = map[objKey]struct{}{}
			ix.values[v] = set
		}
		set[k] = struct{}{}
	}
}

func (ix *index[T]) remove(k objKey, obj *T) {
	for _, v := range ix.fn(obj) {
		delete(ix.values[v], k)
		if len(ix.values[v]) == 0 {
			delete(ix.values, v)
		}
	}
}

// EventType says what happened to an object.
type EventType int

const (
	Added EventType = iota
	Updated
	Deleted
)

func (t EventType) String() string { return [...]string{"Added", "Updated", "Deleted"}[t] }

// Event is one change delivered to a handler. Object and Old are the shared
// stored objects: do not modify them. Do not drive persistent state from
// Deleted events (a handler may miss them across restarts): use finalizers.
type Event[T any] struct {
	Type   EventType
	Object *T // the new state; for Deleted, the last known state
	Old    *T // for Updated: the state before
	// Initial marks the Added events of an informer's first list, and the
	// replay of existing objects to a handler added later.
	Initial bool
	// Relisted marks a change found by comparing a new list with the store
	// (after 410 Gone or a reinstalled CRD) instead of seen on the watch; for
	// Deleted, Object is the last state the cache saw.
	Relisted bool
	// Resync marks the periodic re-delivery of an unchanged object (Old == Object).
	Resync bool
}

// Get returns the object namespace/name ("" namespace for cluster-scoped
// types). It is shared with every reader: do not modify it. It may be stale:
// the cache follows the server with a delay (see WaitForResourceVersion).
func (i *Informer[T]) Get(namespace, name string) (*T, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.get(namespace, name)
}

// List returns the objects in opts.Namespace ("" means all) matching
// opts.Labels, in no particular order. opts.Fields is not evaluated (the
// scope's field selector was applied by the server). The objects are shared:
// do not modify them.
func (i *Informer[T]) List(opts ListOptions) []*T {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.list(opts.Namespace, opts.Labels)
}

// ByIndex returns the objects that the index named index files under value
// (nil for an unknown index). The objects are shared: do not modify them.
func (i *Informer[T]) ByIndex(index, value string) []*T {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.byIndex(index, value)
}

// AddIndex adds an index: fn returns the values an object is filed under,
// the same ones each time for the same object. Add indexes before Start, so
// they are not built under the lock from a full store.
//
//	pods.AddIndex("node", func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })
func (i *Informer[T]) AddIndex(name string, fn func(obj *T) []string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.store.addIndex(name, fn); err != nil {
		return fmt.Errorf("%w (cache of %s)", err, i.res)
	}
	return nil
}

// AddHandler calls fn with every event, in order, from its own goroutine and
// unbounded buffer, so a slow handler delays only itself. A handler added
// after objects were stored first gets them as Initial Added events. fn must
// return: the informer's shutdown waits for it.
func (i *Informer[T]) AddHandler(fn func(Event[T])) {
	h := &handler[T]{fn: fn, wake: make(chan struct{}, 1)}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, obj := range i.store.list("", nil) {
		h.push(Event[T]{Type: Added, Object: obj, Initial: true})
	}
	i.handlers = append(i.handlers, h)
	if i.ctx != nil && !i.stopped {
		ctx := i.ctx
		i.wg.Go(func() { h.run(ctx) })
	}
}

// WaitForResourceVersion returns once every list/watch of the informer has
// applied resourceVersion rv or a newer one, so that a read sees a write that
// returned rv. A quiet namespace advances only with the server's bookmarks
// (about once a minute): bound ctx.
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
		return true
	})
}

// waitForObject is WaitForResourceVersion for one object (read-your-writes
// in kctl.go): it returns once the cache holds namespace/name at rv or newer,
// or the list/watch of its namespace is past rv, and at once if the scope has
// no such namespace. Quiet namespaces do not delay it.
func (i *Informer[T]) waitForObject(ctx context.Context, namespace, name, rv string) error {
	var w *watchState
	for _, x := range i.watches {
		if x.namespace == "" || x.namespace == namespace {
			w = x
		}
	}
	if w == nil {
		return nil
	}
	return i.wait(ctx, "reach resourceVersion "+rv+" of "+namespace+"/"+name, func() bool {
		cur, ok := i.store.get(namespace, name)
		return w.synced && (rvAtLeast(w.rv, rv) || ok && rvAtLeast(metaOf(cur).GetResourceVersion(), rv))
	})
}

// wait returns once doneLocked (called under mu) holds, or with an error
// saying why not when ctx ends or the informer stops.
func (i *Informer[T]) wait(ctx context.Context, what string, doneLocked func() bool) error {
	for {
		i.mu.Lock()
		if doneLocked() {
			i.mu.Unlock()
			return nil
		}
		if i.stopped {
			i.mu.Unlock()
			return fmt.Errorf("kctl: %s stopped before it could %s", i, what)
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
				return fmt.Errorf("kctl: %s did not %s: %w (%w)", i, what, failure, ctx.Err())
			}
			return fmt.Errorf("kctl: %s did not %s: %w", i, what, ctx.Err())
		}
	}
}

func (i *Informer[T]) notifyLocked() {
	if i.progress != nil {
		close(i.progress)
		i.progress = nil
	}
}

// rvAtLeast reports whether resourceVersion have is rv or newer.
func rvAtLeast(have, rv string) bool {
	c, err := resourceversion.CompareResourceVersion(have, rv)
	return err == nil && c >= 0 || have == rv
}

// Stats returns the number of objects and their size encoded (protobuf
// for built-in types, JSON for declared ones): a lower bound of the heap they
// take, which is about 6 times more for a Pod without managedFields. Sizes
// are measured here, for the objects stored since the last call, not on the
// watch's hot path. For the metrics page.
func (i *Informer[T]) Stats() (objects int, bytes int64) {
	i.mu.RLock()
	todo := i.store.unsized()
	i.mu.RUnlock()
	sizes := make([]int, len(todo))
	for j, obj := range todo { // stored objects are immutable: no lock needed
		if p, ok := any(obj).(interface{ Size() int }); ok {
			sizes[j] = p.Size()
			continue
		}
		var n byteCounter
		_ = json.NewEncoder(&n).Encode(obj)
		sizes[j] = int(n)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for j, obj := range todo {
		i.store.setSize(obj, sizes[j])
	}
	return i.store.count, i.store.bytes
}

type byteCounter int

func (n *byteCounter) Write(p []byte) (int, error) { *n += byteCounter(len(p)); return len(p), nil }

func (i *Informer[T]) emitLocked(e Event[T]) {
	for _, h := range i.handlers {
		h.push(e)
	}
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

// handler delivers events to one handler function from its own goroutine.
type handler[T any] struct {
	fn      func(Event[T])
	mu      sync.Mutex
	pending []Event[T]    // queued events, oldest first
	wake    chan struct{} // holds a token when pending may be non-empty
}

func (h *handler[T]) push(e Event[T]) {
	h.mu.Lock()
	h.pending = append(h.pending, e)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *handler[T]) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.mu.Lock()
		batch := h.pending
		h.pending = nil
		h.mu.Unlock()
		for j, e := range batch {
			if ctx.Err() != nil {
				return
			}
			h.fn(e)
			batch[j] = Event[T]{} // let the object go
		}
	}
}

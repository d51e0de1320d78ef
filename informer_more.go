package kctl

// Floor 2: an Informer as its user reads it directly: Get, List and
// AddHandler of T, thin methods over the core's (informer.go), which are
// what floor 1's controllers and cached reads call, and Event[T], the
// event a user's handler takes (the core's is handler.go's event); and
// what an Informer tells beyond the data path, which floor 1 never asks:
// how much it holds (Stats, Undecodable), for the metrics page (the
// Cache's made hook shows each informer), and WaitForResourceVersion,
// whose wait for one object read-your-writes uses (readyourwrites.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kctl-dev/kctl/internal/rvorder"
)

// Get returns the object namespace/name ("" namespace for cluster-scoped
// types). It is shared with every reader: do not modify it. It may be stale:
// the cache follows the server with a delay (see WaitForResourceVersion).
func (i *Informer[T]) Get(namespace, name string) (*T, bool) {
	return i.informer.Get(namespace, name)
}

// List returns the objects in opts.Namespace ("" means all) matching
// opts.Labels and opts.Fields, in no particular order. The objects are
// shared: do not modify them.
//
//	pods.AddIndex("spec.nodeName", func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })
//	onNode, err := pods.List(kctl.ListOptions{Fields: "spec.nodeName=node-1,metadata.namespace!=kube-system"})
//
// A field selector may require (=, ==, !=) metadata.name, metadata.namespace
// and any field with an index of the same name (AddIndex); a requirement of
// the informer's own scope (Scope.Fields) holds for every cached object. Any
// other field is an error naming it (the cache never ignores a selector)
// and suggesting an index, and Uncached() only if the server filters T by
// that field.
// A label selector with key=value or key in (...) is answered from an index
// of that label key, built by the first such List (up to 16 indexes per
// informer), and a field required to equal a value from its index.
func (i *Informer[T]) List(opts ListOptions) ([]*T, error) {
	return i.informer.List(opts)
}

// Event is one change delivered to a handler. Object and Old are the shared
// stored objects: do not modify them. Do not drive persistent state from
// Deleted events (a handler may miss them across restarts): use finalizers.
type Event[T any] struct {
	Type   EventType
	Object *T // the new state; for Deleted, the last known state
	Old    *T // for Updated: the state before
	// Initial marks the Added events of the first list, and the replay of
	// stored objects to a handler added later.
	Initial bool
	// Relisted marks a change found by a relist (after 410 Gone or a
	// reinstalled CRD), not on the watch; a Deleted one's Object is the last
	// state the cache saw.
	Relisted bool
	Resync   bool // the periodic re-delivery of an unchanged object (Old == Object)
}

// AddHandler calls fn with every event, in order, from its own goroutine and
// unbounded buffer, so a slow handler delays only itself. A handler added
// after objects were stored first gets them as Initial Added events. fn must
// return: the informer's shutdown waits for it.
func (i *Informer[T]) AddHandler(fn func(Event[T])) {
	i.addHandler(func(e event[*T]) { fn(Event[T](e)) })
}

// Stats returns the number of objects and their encoded size (protobuf for
// built-in types, JSON for declared ones): what they hold, not what they
// take. Decoded alone, a Pod takes several times its encoded size; in the
// cache, objects share their equal parts (internal/share), so the Pods of a few
// workloads take less. It measures the objects stored since the last call,
// off the watch's hot path. For the metrics page.
func (i *informer[P]) Stats() (objects int, bytes int64) {
	var todo []P
	i.mu.RLock()
	for _, inner := range i.store.objects {
		for _, e := range inner {
			if e.size == 0 {
				todo = append(todo, e.obj)
			}
		}
	}
	i.mu.RUnlock()
	sizes := make([]int, len(todo))
	// Stored objects are immutable: no lock needed.
	for j, obj := range todo {
		sizer, ok := any(obj).(interface{ Size() int })
		if ok {
			sizes[j] = sizer.Size()
		} else {
			b, _ := json.Marshal(obj)
			sizes[j] = len(b)
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for j, obj := range todo {
		i.store.setSize(obj, sizes[j])
	}
	return i.store.count, i.store.bytes
}

// setSize records obj's size if obj is still stored and unmeasured.
func (s *store[P]) setSize(obj P, size int) {
	m := metaOf(obj)
	if e, ok := s.objects[m.GetNamespace()][m.GetName()]; ok && any(e.obj) == any(obj) && e.size == 0 {
		e.size = uint32(size)
		s.bytes += int64(size)
		s.objects[m.GetNamespace()][m.GetName()] = e
	}
}

// Undecodable returns the number of objects in scope that exist on the
// server but whose current state does not decode into T: a CRD field that
// changed type, a bad write to a field the schema does not check. Get, List
// and the handlers see the last good copy of each, if it ever decoded, until
// it decodes again (an Updated event) or is deleted (a Deleted event with
// that copy); a relist never takes one for deleted. Each is logged once. For
// the metrics page (kctl_cache_undecodable_objects).
func (i *informer[P]) Undecodable() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.bad.Len()
}

// WaitForResourceVersion returns once every list/watch of the informer has
// applied resourceVersion rv or a newer one, so that a read sees a write that
// returned rv. A quiet namespace advances only with the server's bookmarks
// (about once a minute): bound ctx.
func (i *informer[P]) WaitForResourceVersion(
	ctx context.Context,
	rv string,
) error {
	err := rvorder.Check(rv)
	if err != nil {
		return fmt.Errorf("kctl: cannot wait for resourceVersion %q "+
			"of %s: %w", rv, i.res, err)
	}
	return i.waitForObject(ctx, "", "", rv)
}

// waitForObject (read-your-writes) returns once the list/watch of namespace
// ("" for every one) has applied rv, or the cache holds namespace/name at rv
// or newer; at once if the scope has no such namespace.
func (i *informer[P]) waitForObject(
	ctx context.Context,
	namespace, name, rv string,
) error {
	what := "reach resourceVersion " + rv
	if name != "" {
		what += " of " + namespace + "/" + name
	}
	caughtUp := func() bool {
		cur, stored := i.store.get(namespace, name)
		fresh := stored && rvorder.AtLeast(metaOf(cur).GetResourceVersion(), rv)
		// behind reports whether w is one that is behind: a list/watch of
		// namespace that has not synced, or has not applied rv while the
		// cache does not hold namespace/name at rv either.
		behind := func(w *watchState) bool {
			ns := w.opts.Namespace
			mine := namespace == "" || ns == "" || ns == namespace
			applied := rvorder.AtLeast(w.rv, rv)
			return mine && (!w.synced || !fresh && !applied)
		}
		return !slices.ContainsFunc(i.watches, behind)
	}
	return i.wait(ctx, what, caughtUp)
}

package kctl

// An Informer's read side: Get, List, ByIndex, AddIndex, the waits
// (WaitForResourceVersion, read-your-writes) and Stats, all reading the store
// (store.go) under the Informer's lock.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Get returns the object namespace/name ("" namespace for cluster-scoped
// types). It is shared with every reader: do not modify it. It may be stale:
// the cache follows the server with a delay (see WaitForResourceVersion).
func (i *Informer[T]) Get(namespace, name string) (*T, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.get(namespace, name)
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
// other field is an error naming it: the cache never ignores a selector.
// A label selector with key=value or key in (...) is answered from an index
// of that label key, built by the first such List (up to 16 indexes per
// informer), and a field required to equal a value from its index.
func (i *Informer[T]) List(opts ListOptions) ([]*T, error) {
	i.mu.RLock()
	out, missing, err := i.listLocked(opts)
	i.mu.RUnlock()
	if missing == "" || err != nil {
		return out, err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	out, missing, err = i.listLocked(opts) // asked again under the write lock: another List may have filled the room
	for missing != "" && err == nil {
		i.store.labelIndex(missing)
		out, missing, err = i.listLocked(opts)
	}
	return out, err
}

// listLocked is one try of List, with mu held (read or write).
func (i *Informer[T]) listLocked(opts ListOptions) (out []*T, missing string, err error) {
	scope := ""
	if len(i.watches) > 0 {
		scope = i.watches[0].opts.Fields // every watch has the scope's
	}
	fields, err := i.store.fieldReqs(opts.Fields, scope)
	if err != nil {
		return nil, "", fmt.Errorf("%w (%s)", err, i)
	}
	out, missing = i.store.list(opts.Namespace, opts.Labels, fields)
	return out, missing, nil
}

// ByIndex returns the objects that the index named index files under value
// (nil for an unknown index). The objects are shared: do not modify them.
func (i *Informer[T]) ByIndex(index, value string) []*T {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.byIndex(index, value)
}

// AddIndex adds an index: fn returns the values an object is filed under,
// the same each time for the same object. Add indexes before Start, so they
// are not built under the lock from a full store.
//
//	pods.AddIndex("node", func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })
func (i *Informer[T]) AddIndex(name string, fn func(obj *T) []string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.store.addIndex(name, fn); err != nil {
		return fmt.Errorf("%w (%s)", err, i)
	}
	return nil
}

// WaitForResourceVersion returns once every list/watch of the informer has
// applied resourceVersion rv or a newer one, so that a read sees a write that
// returned rv. A quiet namespace advances only with the server's bookmarks
// (about once a minute): bound ctx.
func (i *Informer[T]) WaitForResourceVersion(ctx context.Context, rv string) error {
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return fmt.Errorf("kctl: cannot wait for resourceVersion %q of %s: %w", rv, i.res, err)
	}
	return i.waitForObject(ctx, "", "", rv)
}

// waitForObject (read-your-writes) returns once the list/watch of namespace
// ("" for every one) has applied rv, or the cache holds namespace/name at rv
// or newer; at once if the scope has no such namespace.
func (i *Informer[T]) waitForObject(ctx context.Context, namespace, name, rv string) error {
	what := "reach resourceVersion " + rv
	if name != "" {
		what += " of " + namespace + "/" + name
	}
	return i.wait(ctx, what, func() bool {
		cur, ok := i.store.get(namespace, name)
		ok = ok && rvAtLeast(metaOf(cur).GetResourceVersion(), rv)
		return !slices.ContainsFunc(i.watches, func(w *watchState) bool { // one that is behind
			mine := namespace == "" || w.opts.Namespace == "" || w.opts.Namespace == namespace
			return mine && (!w.synced || !ok && !rvAtLeast(w.rv, rv))
		})
	})
}

// wait returns once doneLocked (called under mu) holds, or with an error
// saying why not when ctx ends or the informer stops.
func (i *Informer[T]) wait(ctx context.Context, what string, doneLocked func() bool) error {
	for {
		i.mu.Lock()
		if done := doneLocked(); done || i.stopped {
			i.mu.Unlock()
			if done {
				return nil
			}
			return fmt.Errorf("kctl: %s stopped before it could %s", i, what)
		}
		if i.progress == nil {
			i.progress = make(chan struct{})
		}
		progress := i.progress
		failure := i.failureLocked()
		i.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			if failure != nil {
				return fmt.Errorf("kctl: %s did not %s: %w (%w)", i, what, unprefixed(failure), ctx.Err())
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

// Stats returns the number of objects and their encoded size (protobuf for
// built-in types, JSON for declared ones): what they hold, not what they
// take. Decoded alone, a Pod takes several times its encoded size; in the
// cache, objects share their equal parts (share.go), so the Pods of a few
// workloads take less. It measures the objects stored since the last call,
// off the watch's hot path. For the metrics page.
func (i *Informer[T]) Stats() (objects int, bytes int64) {
	var todo []*T
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
	for j, obj := range todo { // stored objects are immutable: no lock needed
		if p, ok := any(obj).(interface{ Size() int }); ok {
			sizes[j] = p.Size()
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

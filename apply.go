package kctl

// How the informer writes to its store: a list's result (stored) and a
// watch's events (apply), told to the handlers in store order, and the
// objects that stop or start decoding into T (internal/undecodable tracks
// and logs them); and the start of each list or watch (begin), which
// reshard ends when the shard selector changes. list_watch.go and
// watch_list.go call them.

import (
	"context"
	"errors"
	"fmt"

	"github.com/kctl-dev/kctl/internal/undecodable"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// keyed is the decodeError of an object a list could not decode; one
// without a key is logged: the list then deletes no object from the
// cache, as any might be that one (internal/undecodable).
func (i *informer[P]) keyed(err error) *decodeError {
	return undecodable.Keyed(i.log, i.name, err)
}

// stored makes the store's objects of w's namespace a list's result,
// listed at resourceVersion rv, and tells the handlers what changed.
func (i *informer[P]) stored(
	w *watchState,
	all []P,
	bad []*decodeError,
	rv string,
) {
	i.mu.Lock()
	initial := !w.synced
	before := i.store.bad.Snapshot() // to log what stops or starts decoding
	emit := func(t EventType, obj, old P) {
		e := event[P]{Type: t, Object: obj, Old: old}
		e.Initial = initial
		e.Relisted = !initial
		i.emitLocked(e)
	}
	ns := w.opts.Namespace
	i.store.replace(ns, all, bad, emit)
	changes := i.store.bad.Since(before, i.store.has)
	w.rv = rv
	w.synced = true
	w.listed = w.shard
	w.err = nil
	i.notifyLocked()
	i.mu.Unlock()
	changes.Log(i.log, i.name)
}

// apply stores one watch event and tells the handlers; an ERROR event is
// returned. An object that does not decode is applied by applyUndecodable
// if its key is known; an event without a key or of unknown type is
// logged and skipped.
func (i *informer[P]) apply(w *watchState, e watchEvent[P]) error {
	if e.Type == "ERROR" && e.Status != nil {
		se := &apierrors.StatusError{ErrStatus: *e.Status}
		return fmt.Errorf("kctl: the watch of %s "+
			"ended with an error: %w", i.res, se)
	}
	change := e.Type == "ADDED" ||
		e.Type == "MODIFIED" ||
		e.Type == "DELETED"
	bad, isBad := errors.AsType[*decodeError](e.Err)
	if isBad && bad.Name != "" && change {
		i.applyUndecodable(w, e.Type, bad)
		return nil
	}
	bookmark := e.Type == "BOOKMARK"
	broken := e.Err != nil || isNil(e.Object)
	if !broken && !bookmark {
		noName := metaOf(e.Object).GetName() == ""
		broken = noName || !change
	}
	if broken {
		undecodable.Skipped(i.log, i.name, e.Type, e.Err)
		return nil
	}
	obj := e.Object
	m := metaOf(e.Object)
	gone := e.Type == "DELETED"
	if !bookmark {
		i.transform(obj)
	}
	// a deleted object is not stored: nothing to share with
	if !bookmark && !gone {
		i.sharer.Share(obj)
	}
	k := objKey{m.GetNamespace(), m.GetName()}
	wasBad := false // then it decodes again
	i.mu.Lock()
	switch {
	case bookmark:
	case gone:
		if i.store.remove(k.namespace, k.name) {
			i.emitLocked(event[P]{Type: Deleted, Object: obj})
		}
	default:
		wasBad = i.store.bad.Has(k)
		t, old, changed := i.store.put(obj)
		if changed { // else a duplicate
			ev := event[P]{Type: t, Object: obj, Old: old}
			i.emitLocked(ev)
		}
	}
	if rv := m.GetResourceVersion(); rv != "" {
		w.rv = rv
	}
	i.notifyLocked()
	i.mu.Unlock()
	if wasBad {
		undecodable.Again(i.log, i.name, k)
	}
	return nil
}

// applyUndecodable applies a watch event whose object does not decode into
// T but whose key is known. A delete removes the object's last good copy,
// if any, and tells the handlers (Deleted, with that copy); an add or update
// keeps it and marks the object undecodable, logged once per object.
func (i *informer[P]) applyUndecodable(
	w *watchState,
	typ string,
	bad *decodeError,
) {
	k := objKey{bad.Namespace, bad.Name}
	first := false
	i.mu.Lock()
	if typ == "DELETED" {
		last, ok := i.store.get(k.namespace, k.name)
		i.store.remove(k.namespace, k.name)
		if ok {
			i.emitLocked(event[P]{Type: Deleted, Object: last})
		}
	} else {
		first = i.store.bad.Mark(k, bad)
	}
	if bad.ResourceVersion != "" {
		w.rv = bad.ResourceVersion
	}
	i.notifyLocked()
	i.mu.Unlock()
	if first {
		undecodable.Stopped(i.log, i.name, bad)
	}
}

// begin starts one list or watch of w: it ends the one before, reads
// the shard selector, and returns the context that reshard cancels and
// whether reshard asked for a list since the last begin.
func (i *informer[P]) begin(
	ctx context.Context,
	w *watchState,
) (context.Context, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
	actx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	resharded := w.reshard
	w.reshard = false
	w.shard = i.shard
	return actx, resharded
}

// end ends w's last list or watch.
func (i *informer[P]) end(w *watchState) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
}

// listOpts are w's options for a list or watch: its scope and shard.
func (w *watchState) listOpts() ListOptions {
	opts := w.opts
	opts.ShardSelector = w.shard
	return opts
}

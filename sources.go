package kctl

// The sources of a controller: besides its own type T, objects it owns
// (Owns), objects mapped to keys (Watches) and values from outside the
// cluster (FromChannel). Each turns its events into keys of T on the
// controller's queue (enqueue, in controller.go).

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Owns makes changes to objects of type C enqueue their controller owner of
// type T (the owner reference with controller: true, see SetControllerReference).
// An owner reference matches T by group and kind, whatever its version: a
// child whose owner reference says example.com/v1beta1 still enqueues its
// owner after the controller moves to example.com/v1, as in controller-runtime.
func Owns[C any, PC Object[C], T any](c *Controller[T], preds ...Predicate) *Controller[T] {
	return watchSource[C, PC](c, "owned", preds, func(obj *C) []Key { return ownerKeys(c.res, metaOf(obj)) })
}

// ownerKeys is the key of obj's controller owner if that owner is of res
// (same group and kind, any version), else none.
func ownerKeys(res Resource, obj metav1.Object) []Key {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != res.Kind {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != res.Group {
		return nil
	}
	ns := obj.GetNamespace()
	if !res.Namespaced {
		ns = ""
	}
	return []Key{{Namespace: ns, Name: ref.Name}}
}

// Watches makes changes to objects of type O enqueue the keys mapFn returns,
// e.g. a ConfigMap change enqueues every object that mounts it.
func Watches[O any, PO Object[O], T any](c *Controller[T], mapFn func(obj *O) []Key, preds ...Predicate) *Controller[T] {
	return watchSource[O, PO](c, "mapped", preds, mapFn)
}

func watchSource[O any, PO Object[O], T any](c *Controller[T], cause string, preds []Predicate, keys func(*O) []Key) *Controller[T] {
	if c.hasStarted() { // ignored (configure logs it): make no informer for it
		return c.configure(cause+" source", func() {})
	}
	inf, err := InformerFor[O, PO](c.mgr.cache)
	if err != nil {
		c.mgr.misuse(fmt.Errorf("kctl: controller %q: %w", c.name, unprefixed(err)))
		return c
	}
	kind := ""
	if r, err := ResourceOf[O](); err == nil {
		kind = r.Kind
	}
	handle := func(ev Event[O]) {
		if !c.pass(objectEvent(ev), preds) {
			return
		}
		m := metaOf(ev.Object)
		t := Trigger{Cause: cause, Detail: fmt.Sprintf("%s %s %s", kind, Key{m.GetNamespace(), m.GetName()}, ev.Type)}
		for _, k := range keys(ev.Object) {
			c.enqueue(k, t, priorityOf(ev))
		}
		if ev.Old != nil && ev.Old != ev.Object { // an update that moved the object away from its old keys
			for _, k := range keys(ev.Old) {
				c.enqueue(k, t, priorityOf(ev))
			}
		}
	}
	return c.configure(cause+" source", func() {
		c.connects = append(c.connects, func() { inf.AddHandler(live(handle)) })
		c.caches = append(c.caches, inf) // run waits for every source's cache
		if cause == "mapped" {           // mapped keys need not be objects of T: replay them too
			c.replays = append(c.replays, replay(inf, handle))
		}
	})
}

// live passes on the events of a running informer except those of its first
// list: each run's replay hands the controller every cached object anyway,
// and the first list's events may still be on their way when it does.
func live[O any](handle func(Event[O])) func(Event[O]) {
	return func(ev Event[O]) {
		if !ev.Initial {
			handle(ev)
		}
	}
}

// replay returns a function that hands every cached object to handle as an
// initial Added event: how a new run learns what happened while it was not running.
func replay[O any](inf *Informer[O], handle func(Event[O])) func() {
	return func() {
		all, _ := inf.List(ListOptions{}) // no selector: no error
		for _, obj := range all {
			handle(Event[O]{Type: Added, Object: obj, Initial: true})
		}
	}
}

// FromChannel reconciles keys for events from outside the cluster (a ticker,
// a webhook): every value received from ch that passes filter (nil passes
// all) enqueues the keys toKeys returns. The channel is read while the
// Manager runs; closing it ends the source.
func FromChannel[E any, T any](c *Controller[T], ch <-chan E, filter func(E) bool, toKeys func(E) []Key) *Controller[T] {
	c.mgr.mu.Lock()
	defer c.mgr.mu.Unlock()
	err := c.mgr.addLocked(Runnable{Name: "channel source of " + c.name, NeedLeader: true, Run: func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case e, ok := <-ch:
				if !ok {
					return nil
				}
				if filter != nil && !filter(e) {
					continue
				}
				for _, k := range toKeys(e) {
					c.enqueue(k, Trigger{Cause: "channel", Detail: fmt.Sprint(e)}, keep)
				}
			}
		}
	}})
	if err != nil {
		c.log.Error(err.Error())
	}
	return c
}

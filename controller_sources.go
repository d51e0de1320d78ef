package kctl

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Floor 2: how a controller is built, and its sources besides its own
// type. configure (first) fixes the builder's calls once it starts. Owns and
// Watches make an informer of another type feed the controller's queue,
// through its predicates (controller.go's onEvent path) with the trigger
// "owned" or "mapped", on the plain data floor 1's run reads: the
// controller's connects, caches and replays (as watchOwn does for its own
// type). Their metadata-only forms are in metadata.go, OwnsEveryOwner in
// helpers.go. FromChannel, at the end, is a source of keys from outside
// the cluster (a ticker, a webhook), through the Manager's runnables
// (controllerHost.Add) and the controller's enqueue.

// Every builder call, here and in controller_options.go, goes through
// configure, which fixes the configuration once the controller starts.

// hasStarted reports whether the controller's configuration is fixed.
func (c *controller[P]) hasStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// configure applies a builder call, unless the controller has started: its
// configuration is then fixed, and the call is ignored with an error log.
func (c *controller[P]) configure(call string, apply func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		c.log.Error("kctl: " + call + " on a controller that has started is ignored: " +
			"make every builder call right after NewController, before the controller's caches sync")
		return
	}
	apply()
}

// configure is the core's configure, returning c for the builder's chain.
func (c *Controller[T]) configure(call string, apply func()) *Controller[T] {
	c.controller.configure(call, apply)
	return c
}

// Owns makes changes to objects of type C enqueue their controller owner of
// type T (the owner reference with controller: true, see SetControllerReference;
// OwnsEveryOwner follows the others too). It caches C's objects whole;
// OwnsMetadata caches only their metadata, for a reconcile that reads no
// more of them (a tenth of the memory for Pods).
// An owner reference matches T by group and kind, whatever its version: a
// child whose owner reference says example.com/v1beta1 still enqueues its
// owner after the controller moves to example.com/v1, as in controller-runtime.
func Owns[C any, PC Object[C], T any](c *Controller[T], preds ...Predicate) *Controller[T] {
	if c.keysOnly("Owns") {
		return c
	}
	keys := func(obj *C) []Key { return ownerKeys(c.res, metaOf(obj)) }
	return watchSource[C, PC](c, "owned", preds, keys)
}

// keysOnly reports whether c is a controller of keys (NewKeyController),
// whose keys have no kind for an owner reference to match, and records
// call on it as a builder mistake.
func (c *controller[P]) keysOnly(call string) bool {
	if c.ops != nil { // a controller of keys reads no object

		return false
	}
	c.host.misuse(fmt.Errorf("kctl: controller %q: %s on a "+
		"controller of keys (NewKeyController), whose keys have "+
		"no kind for an owner reference to match; use Watches "+
		"with a mapping that reads the owner references",
		c.name, call))
	return true
}

// Watches makes changes to objects of type O enqueue the keys mapFn returns,
// e.g. a ConfigMap change enqueues every object that mounts it.
func Watches[O any, PO Object[O], T any](c *Controller[T], mapFn func(obj *O) []Key, preds ...Predicate) *Controller[T] {
	return watchSource[O, PO](c, "mapped", preds, mapFn)
}

// watchSource is informerSource over O's informer (InformerFor).
func watchSource[O any, PO Object[O], T any](c *Controller[T], cause string, preds []Predicate, keys func(*O) []Key) *Controller[T] {
	return informerSource(c, InformerFor[O, PO], cause, preds, keys)
}

// informerSource makes the events of the informer that inform returns
// from the Manager's cache enqueue their keys: those of a cause "mapped"
// source are replayed too. It is the one path of Owns, Watches and their
// metadata-only forms (metadata.go), which differ only in the informer.
func informerSource[O any, T any](c *Controller[T], inform func(*Cache) (*Informer[O], error), cause string, preds []Predicate, keys func(*O) []Key) *Controller[T] {
	if c.hasStarted() { // ignored (configure logs it): make no informer for it
		return c.configure(cause+" source", func() {})
	}
	inf, err := inform(c.host.Cache())
	if err != nil {
		c.host.misuse(fmt.Errorf("kctl: controller %q: %w", c.name, unprefixed(err)))
		return c
	}
	s := source[*O]{inf: &inf.informer, kind: inf.res.Kind, cause: cause, preds: preds, keys: keys}
	c.configure(cause+" source", func() { addSource(&c.controller, s) })
	return c
}

// source is an object source of a controller (Owns, Watches...), over
// PO = *O: what addSource needs, so that it is compiled once.
type source[PO any] struct {
	inf   *informer[PO]
	kind  string // of O, for the trigger's detail
	cause string // "owned" or "mapped"
	preds []Predicate
	keys  func(obj PO) []Key
}

// addSource makes the events of s.inf enqueue their keys, and has the
// controller's run wait for s.inf; c is being configured (under c.mu).
func addSource[PO any, P any](c *controller[P], s source[PO]) {
	handle := func(ev event[PO]) {
		oe := objectEvent(ev)
		drops := func(p Predicate) bool { return !p(oe) }
		if slices.ContainsFunc(c.filters, drops) || slices.ContainsFunc(s.preds, drops) {
			return
		}
		m := metaOf(ev.Object)
		k := Key{m.GetNamespace(), m.GetName()}
		t := Trigger{Cause: s.cause, Detail: fmt.Sprintf("%s %s %s", s.kind, k, ev.Type), low: c.lowIf(oe)}
		for _, k := range s.keys(ev.Object) {
			c.enqueue(k, t)
		}
		moved := !isNil(ev.Old) && any(ev.Old) != any(ev.Object)
		if moved { // an update that moved the object away from its old keys
			for _, k := range s.keys(ev.Old) {
				c.enqueue(k, t)
			}
		}
	}
	c.connects = append(c.connects, func() { s.inf.addHandler(live(handle)) })
	c.caches = append(c.caches, s.inf) // syncCaches waits for every source's cache
	if s.cause == "mapped" {           // mapped keys need not be objects of T: replay them too
		c.replays = append(c.replays, replay(s.inf, s.keys, handle))
	}
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

// FromChannel reconciles keys for events from outside the cluster (a ticker,
// a webhook): every value received from ch that passes filter (nil passes
// all) enqueues the keys toKeys returns. The channel is read while the
// Manager runs, on every replica, whether or not the controller runs
// there (NeedLeader): the keys of a value received while it does not (a
// standby, or before its caches have synced) are kept, the last cause of
// each, and queued when it runs; so a standby never holds up a sender.
// filter and toKeys run on every replica too: keep them cheap and free of
// side effects. A standby holds one kept cause per distinct key until it
// runs the controller. Closing the channel ends the source.
func FromChannel[E any, T any](c *Controller[T], ch <-chan E, filter func(E) bool, toKeys func(E) []Key) *Controller[T] {
	fromChannel(&c.controller, ch, filter, toKeys)
	return c
}

// fromChannel is FromChannel in the core: its reader is a runnable of
// every replica (enqueue keeps the keys while the controller does not run).
func fromChannel[E any, P any](c *controller[P], ch <-chan E, filter func(E) bool, toKeys func(E) []Key) {
	err := c.host.Add(Runnable{Name: "channel source of " + c.name, Run: func(ctx context.Context) error {
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
				why := Trigger{Cause: "channel", Detail: fmt.Sprint(e), keep: true}
				for _, k := range toKeys(e) {
					c.enqueue(k, why)
				}
			}
		}
	}})
	if err != nil {
		c.log.Error(err.Error())
	}
}

package kctl

// An extra: NewKeyController, a controller whose work is keyed by
// something other than one object of a type (an aggregate, a singleton,
// something outside the cluster): a controller whose reconcile function
// takes the key, with no informer.

import "context"

// NewKeyController makes a controller named name that calls reconcile for
// every key its sources enqueue, whether or not the key names an object:
//
//	c := kctl.NewKeyController(mgr, "pod-summary", func(ctx context.Context, k kctl.Key) (kctl.Result, error) {
//		// recompute the ConfigMap k.Namespace/k.Name from every Pod of k.Namespace
//	})
//	kctl.Watches(c, func(p *corev1.Pod) []kctl.Key { return []kctl.Key{{Namespace: p.Namespace, Name: "pod-summary"}} })
//
// It has no type of its own: its keys come from Watches, FromChannel and
// Enqueue, with the queue, backoff, metrics, triggers, options and leader
// rules of NewController (a key from Watches is replayed at each run, as
// the keys of a controller's own objects are). Owns needs the owner's
// kind, which a key has not: it is an error from Manager.Start; use
// Watches instead. OnDelete and Finalizer do nothing on it: there is no
// object to hand them.
func NewKeyController(
	m *Manager,
	name string,
	reconcile func(ctx context.Context, k Key) (Result, error),
) *Controller[Key] {
	c := &Controller[Key]{}
	c.setUp(m, name)
	c.reconcile = func(ctx context.Context, k Key, _ *Key) (Result, error) {
		return reconcile(ctx, k)
	}
	c.res = Resource{Kind: "key"}
	m.register(&c.controller, name, "keys, made at "+caller())
	return c
}

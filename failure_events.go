package kctl

// An extra: a Warning Event on an object whose reconcile keeps failing
// (WarnAfterFailures), a step of the Controller's reconcile chain, so that
// kubectl describe says why it is not reconciled.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// WarnAfterFailures records a Warning Event (reason ReconcileFailed,
// naming the error) on the object of a key whose reconcile has failed n
// times in a row, and on each failure after, which rec merges into one
// Event with a count while the error reads the same:
//
//	c.WarnAfterFailures(mgr.EventRecorder("podcount"), 5)
//
// A Terminal error counts, and ends the run of failures (it is not
// retried). A key whose object is not in the cache gets no Event.
// Defaults to none: no Events about failures. n must be at least 1.
func (c *Controller[T]) WarnAfterFailures(rec *EventRecorder, n int) *Controller[T] {
	if n < 1 || rec == nil {
		c.host.misuse(fmt.Errorf("kctl: controller %q: "+
			"WarnAfterFailures(%d) needs a recorder and n >= 1",
			c.name, n))
		return c
	}
	warn := func(k Key, attempt int, err error) {
		if attempt < n || c.informer == nil {
			return
		}
		obj, ok := c.informer.Get(k.Namespace, k.Name)
		if !ok {
			return
		}
		msg := fmt.Sprintf("reconcile failed %d or more times "+
			"in a row: %v", n, err)
		rec.Event(metaOf(obj), corev1.EventTypeWarning,
			"ReconcileFailed", msg)
	}
	step := middleware[*T]{name: "WarnAfterFailures", rank: rankReport, wrap: func(next reconcileFunc[*T]) reconcileFunc[*T] {
		return func(ctx context.Context, k Key, obj *T) (Result, error) {
			res, err := next(ctx, k, obj)
			if err != nil {
				t, _ := TriggerFrom(ctx)
				warn(k, t.Attempt, err)
			}
			return res, err
		}
	}}
	return c.configure("WarnAfterFailures", func() { c.use(step) })
}

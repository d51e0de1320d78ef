package kctl

// An extra: FromChannel, a source of keys from outside the cluster (a
// ticker, a webhook), through the Manager's runnables (controllerHost.Add)
// and the controller's enqueue.

import (
	"context"
	"fmt"
)

// FromChannel reconciles keys for events from outside the cluster (a ticker,
// a webhook): every value received from ch that passes filter (nil passes
// all) enqueues the keys toKeys returns. The channel is read while the
// Manager runs; closing it ends the source.
func FromChannel[E any, T any](c *Controller[T], ch <-chan E, filter func(E) bool, toKeys func(E) []Key) *Controller[T] {
	fromChannel(&c.controller, ch, filter, toKeys)
	return c
}

// fromChannel is FromChannel in the core.
func fromChannel[E any, P any](c *controller[P], ch <-chan E, filter func(E) bool, toKeys func(E) []Key) {
	c.mu.Lock()
	c.channels++
	needLeader := !c.everyReplica
	c.mu.Unlock()
	err := c.host.Add(Runnable{Name: "channel source of " + c.name, NeedLeader: needLeader, Run: func(ctx context.Context) error {
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
				why := Trigger{Cause: "channel", Detail: fmt.Sprint(e)}
				for _, k := range toKeys(e) {
					c.enqueue(k, why, asKept)
				}
			}
		}
	}})
	if err != nil {
		c.log.Error(err.Error())
	}
}

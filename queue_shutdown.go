package kctl

// How a Queue ends: ShutDown drops what waits and wakes every Get;
// ShutDownWithDrain also waits for the keys in flight. The layer on top
// of queue.go, as client-go's workqueue documents its shutdown.

import (
	"context"
	"fmt"
)

// ShutDown stops the queue: every Get returns shutdown=true from now on, queued
// and waiting keys are dropped, adds do nothing; keys in flight are still Done.
// A ShutDown while ShutDownWithDrain waits ends that wait at once.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutDownLocked()
	if q.stopDrain != nil {
		close(q.stopDrain)
		q.stopDrain = nil
	}
}

func (q *Queue[K]) shutDownLocked() {
	if q.shuttingDown {
		return
	}
	q.shuttingDown = true
	clear(q.queued)
	q.line.Reset()
	clear(q.dirty)
	q.waiting.Reset()
	if len(q.processing) == 0 {
		close(q.drained)
	}
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown, then it waits until every key handed out
// is Done; if ctx ends first, it returns an error wrapping ctx's cause, and
// if ShutDown is called meanwhile, an error at once.
func (q *Queue[K]) ShutDownWithDrain(ctx context.Context) error {
	q.mu.Lock()
	q.shutDownLocked()
	if q.stopDrain == nil {
		q.stopDrain = make(chan struct{})
	}
	stop := q.stopDrain
	q.mu.Unlock()
	select {
	case <-q.drained:
		return nil
	case <-stop:
		n, _, _ := q.InFlight()
		return fmt.Errorf("kctl: queue drain stopped by ShutDown with %d keys still in flight", n)
	case <-ctx.Done():
		n, _, _ := q.InFlight()
		cause := unprefixed(context.Cause(ctx))
		return fmt.Errorf("kctl: queue drain stopped with %d keys still in flight (is a worker stuck or missing a Done?): %w", n, cause)
	}
}

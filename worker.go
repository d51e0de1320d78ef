package kctl

// A controller's run and a reconcile's life, in the order they happen:
// wait for the caches, start the workers; then per key: processNext takes
// it from the queue, handle calls the reconcile chain (whose own step,
// read, hands the cached object on) and applies the reconcile contract
// (controller.go's outcomeOf) in one switch, requeue puts it back.

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/ctrlnames"
	"github.com/kctl-dev/kctl/internal/shutdown"
)

// runLed is the run of a controller that needs leadership (the
// default), in each term: once its caches have synced (runEverywhere
// waits for them), unless it runs on every replica (NeedLeader).
func (c *controller[P]) runLed(ctx, leaseCtx context.Context) error {
	select {
	case <-c.synced:
	case <-ctx.Done():
		return nil // /readyz said what it waited for
	}
	if c.runsEverywhere() {
		return nil
	}
	return c.run(ctx, leaseCtx)
}

// runEverywhere is the run of a controller on every replica, for the
// whole Manager run. It is the one that waits for the caches, for runLed
// too; it then returns unless the controller runs on every replica
// (NeedLeader), which fixes that choice.
func (c *controller[P]) runEverywhere(ctx context.Context) error {
	if c.syncCaches(ctx) != nil {
		return nil // /readyz said what it waited for
	}
	if !c.runsEverywhere() {
		return nil
	}
	owner := c.host.owner()
	if owner == nil {
		return c.run(ctx, context.WithoutCancel(ctx))
	}
	return c.run(ctx, owner.leaseOf(ctx))
}

// runsEverywhere reports whether the controller runs on every replica.
func (c *controller[P]) runsEverywhere() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.everyReplica || c.host.owner() != nil
}

// run is one term of work (the whole Manager run, or one leadership term),
// once the caches have synced: a new queue filled with every cached key,
// then the workers, until ctx ends. In-flight reconciles may then finish
// until the shutdown schedule's DrainBy, unless leaseCtx ends first: the
// lease is lost, and another replica may already reconcile the same keys.
func (c *controller[P]) run(ctx, leaseCtx context.Context) error {
	obs := c.host.observer(c.name, c.workers)
	opts := c.queueOpts
	opts.Observer = obs
	q := NewQueue(opts)
	obs.SetQueue(q.Len, q.InFlight)
	reconcile := c.chained()
	c.mu.Lock()
	c.observer = obs
	c.queue = q
	kept := c.ledger.Reset()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.queue = nil
		c.mu.Unlock()
	}()
	for k, t := range kept { // before the replay, so their cause is the one recorded
		c.enqueue(k, t)
	}
	for _, replay := range c.replays {
		replay(nil)
	}
	// Reconciles run on their own context, so that a graceful shutdown lets
	// them finish; it ends at once, with ErrLeaderLost as the cause, when
	// a Lease is lost: the leader's (Drain below), or a shard member's
	// (leaseCtx).
	work, stop := context.WithCancelCause(leaseCtx)
	defer stop(nil)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for c.processNext(work, q, reconcile) {
			}
		})
	}
	c.log.Info("controller started", "workers", c.workers)
	<-ctx.Done()
	// shuts q down, then cancels work: at once if leadership is lost, else at DrainBy at the latest; logs why
	shutdown.Drain(ctx, work, stop, q, ErrLeaderLost, c.host.drainBy, c.log, c.busy)
	// The Manager stops waiting for a reconcile that ignores its context (see
	// Manager.lead); this goroutine still waits, so that no later term of
	// this process reconciles a key that one still reconciles.
	wg.Wait()
	c.log.Info("controller stopped")
	return nil
}

// syncCaches returns nil once the caches of T and of every source have
// synced, one at a time, each read under the lock so that a source added
// meanwhile is waited for too; or ctx's error if it ends first. Past the
// last, under that lock, it fixes the configuration, so that the builder
// calls made while the caches synced still apply (a controller made after
// Manager.Start); it then connects the sources' handlers and closes
// synced. Only runEverywhere calls it, once per Manager run: a controller
// waits for its caches once, and logs it once.
func (c *controller[P]) syncCaches(ctx context.Context) error {
	if c.waitsFor() != nil {
		c.log.Info("controller waiting for its caches to sync")
	}
	for i := 0; ; i++ {
		c.mu.Lock()
		if i == len(c.caches) {
			c.started = true
			c.mu.Unlock()
			break
		}
		inf := c.caches[i]
		c.mu.Unlock()
		err := inf.WaitForSync(ctx)
		if err != nil {
			return err
		}
	}
	for _, connect := range c.connects {
		connect()
	}
	close(c.synced)
	return nil
}

// waitsFor is the first cache of the controller that has not synced, nil
// once all have: for syncCaches' log and the readiness check (notReady,
// constructors.go, says why it waits).
func (c *controller[P]) waitsFor() syncer {
	c.mu.Lock()
	caches := c.caches
	c.mu.Unlock()
	for _, inf := range caches {
		if !inf.HasSynced() {
			return inf
		}
	}
	return nil
}

// busy names the keys being reconciled and for how long, e.g.
// "reconciling ns/a (for 2.5s)"; "" if none.
func (c *controller[P]) busy() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return shutdown.Busy("reconciling", c.active)
}

// processNext is the worker loop's body: take a key, reconcile it, decide
// what happens to it next. The queue never hands one key to two workers, so
// no key is ever reconciled concurrently.
func (c *controller[P]) processNext(ctx context.Context, q *Queue[Key], reconcile reconcileFunc[P]) bool {
	k, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(k)
	owner := c.host.owner()
	c.mu.Lock()
	if owner != nil && !owner.owns(k) {
		c.skipLocked(k)
		c.mu.Unlock()
		q.Forget(k)
		return true
	}
	t := c.ledger.Take(k) // an event's cause, else the wait's (none since the requeue)
	c.active[k] = time.Now()
	again := c.ledger.Open(k) // closed if k is queued again meanwhile (QueuedAgain)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.active, k)
		c.ledger.Done(k)
		c.mu.Unlock()
	}()
	if t == nil { // a wait (retry, requeue-after) whose key an event had brought back
		t = &Trigger{Cause: "delayed", queued: time.Now()}
	}
	t.again = again
	t.Waited = time.Since(t.queued)
	t.Attempt = q.NumRequeues(k) + 1
	c.handle(ctx, q, reconcile, k, *t)
	return true
}

// skipLocked drops k, a key this replica does not own (a sharded
// Manager's other replica reconciles it): counted, logged at debug.
func (c *controller[P]) skipLocked(k Key) {
	c.ledger.Take(k) // its causes go with it
	c.observer.NotOwned()
	c.log.Debug("key skipped: another replica of the shard group owns it",
		"namespace", k.Namespace, "name", k.Name)
}

// handle runs one reconcile of k, the chain of steps around the
// reconcile function, and applies the reconcile contract.
func (c *controller[P]) handle(ctx context.Context, q *Queue[Key], reconcile reconcileFunc[P], k Key, t Trigger) {
	log := c.log.With("namespace", k.Namespace, "name", k.Name, "reconcileID", ctrlnames.ReconcileID())
	ctx = context.WithValue(context.WithValue(ctx, loggerKey{}, log), triggerKey{}, t)
	start := time.Now()
	c.observer.WorkerStarted() // busy in a reconcile
	var none P                 // the chain's read step reads the object
	res, err := reconcile(ctx, k, none)
	c.observer.WorkerStopped()
	took := time.Since(start)
	c.observer.reconciled(k, t, start, took, res, err)
	attrs := []any{"trigger", t.Cause, "waited", t.Waited, "attempt", t.Attempt, "took", took}
	if t.Detail != "" {
		attrs = append(attrs, "detail", t.Detail)
	}
	switch outcomeOf(t, res, err) {
	case outcomeTerminal:
		log.Error("reconcile failed; not retrying (terminal)", append(attrs, "err", err)...)
		q.Forget(k)
	case outcomeConflict: // a write from a copy the cache had not updated yet
		log.Debug("reconcile hit a conflict (its copy was stale); will retry", append(attrs, "err", err)...)
		c.requeue(k, Trigger{Cause: "retry", Detail: fmt.Sprintf("after a conflict (attempt %d)", t.Attempt)}, func() { q.AddRateLimited(k) })
	case outcomeError, outcomeTimeout:
		log.Error("reconcile failed; will retry", append(attrs, "err", err)...)
		c.requeue(k, Trigger{Cause: "retry", Detail: fmt.Sprintf("after %d failures", t.Attempt)}, func() { q.AddRateLimited(k) })
	case outcomeRequeueAfter:
		log.Debug("reconciled; requeue after", append(attrs, "after", res.RequeueAfter)...)
		q.Forget(k)
		c.requeue(k, Trigger{Cause: "requeue-after", Detail: res.RequeueAfter.String()}, func() { q.AddAfter(k, res.RequeueAfter) })
	default:
		log.Debug("reconciled", attrs...)
		q.Forget(k)
	}
}

// requeue records why k comes back when its wait ends, and adds it. An
// event that queues k before then is the cause of its next reconcile
// (processNext), which drops this one.
func (c *controller[P]) requeue(k Key, t Trigger, add func()) {
	c.mu.Lock()
	t.queued = time.Now()
	c.ledger.Wait(k, t)
	c.mu.Unlock()
	add()
}

// read is the chain's own step (rankRead): it hands the steps inside
// it the latest state of k, a copy of the cached object (nil if none is
// cached, and for a controller of keys) once the cache has caught up
// with this Manager's writes of it (readyourwrites.go); and a panic of
// theirs becomes an error.
func (c *controller[P]) read(next reconcileFunc[P]) reconcileFunc[P] {
	return func(ctx context.Context, k Key, obj P) (res Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				c.observer.Panicked()
				err = fmt.Errorf("kctl: reconcile of %s %s panicked: %v\n%s", c.res.Kind, k, r, debug.Stack())
			}
		}()
		if c.informer == nil {
			return next(ctx, k, obj)
		}
		err = c.host.Cache().caughtUp(ctx, c.informer, k.Namespace, k.Name)
		if err != nil {
			return Result{}, err
		}
		cached, ok := c.informer.Get(k.Namespace, k.Name)
		if ok {
			obj = c.ops.deepCopy(cached)
		}
		return next(ctx, k, obj)
	}
}

package kctl

// The Queue: its lock, its blocking Get and its observer around its
// keys' states and rules (internal/keyqueue); how it ends (ShutDown,
// ShutDownWithDrain); and the RateLimiter of AddRateLimited.

import (
	"context"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/backoff"
	"github.com/kctl-dev/kctl/internal/keyqueue"
	"github.com/kctl-dev/kctl/internal/shutdown"
)

// Queue is the work queue between event handlers and workers: handlers Add
// keys, a worker takes one with Get, works on it and hands it back with Done.
//
//	q := kctl.NewQueue(kctl.QueueOptions[string]{})
//	q.Add("default/web")
//	k, shutdown := q.Get() // blocks until a key is ready; on shutdown, stop
//	err := work(k)         // then q.Forget(k) to reset k's backoff, or q.AddRateLimited(k) to retry
//	q.Done(k)
//
// Guarantees:
//   - Fair: keys are handed out in the order they became ready.
//   - Stingy: a key added many times before a Get is handed out once.
//   - Exclusive: no two workers hold a key; one added while processed is queued again at Done.
//   - Shutdown: every Get returns shutdown=true at once; queued and waiting keys are dropped.
//   - Delays: one min-heap, one timer; adding a waiting key earlier moves it earlier, later
//     never postpones it, queuing it (not low) ends the wait; keys due together become
//     ready in the order they were scheduled.
//   - Priority: low keys go after normal ones, in FIFO order, until AgeLowPriorityAfter puts
//     them at the back of the normal line, so none starves. Add of a queued low key raises it.
//   - Pacing: Debounce makes a burst of adds one run; MinInterval spaces the Gets of a key.
//
// The zero Queue is not usable: NewQueue makes one and starts no goroutine
// (the delay timer is made on first use). All methods are goroutine-safe.
type Queue[K comparable] struct {
	mu sync.Mutex
	// cond.L is &mu. cond is signalled once per key queued and
	// broadcast at shutdown.
	cond sync.Cond

	// keys holds the queued, processing, dirty and waiting keys, and
	// moves them by the guarantees above (internal/keyqueue: its fields
	// carry the invariants); its timer calls fire. ShutDown closes it;
	// its Drained is closed once no key is processing after that.
	keys *keyqueue.Keys[K]

	rl  RateLimiter[K]
	obs QueueObserver
}

// QueueOptions configures NewQueue. The zero value behaves like client-go's
// rate-limiting workqueue: default rate limiter, no pacing, no observer.
type QueueOptions[K comparable] struct {
	// RateLimiter sets AddRateLimited's delays. Defaults to client-go's:
	// NewRateLimiter(5*time.Millisecond, 1000*time.Second, 10, 100).
	RateLimiter RateLimiter[K]
	// Debounce, when > 0, delays an Add (not AddLowPriority) of a key that is
	// not queued by Debounce, so that a burst of adds is one run.
	Debounce time.Duration
	// MinInterval, when > 0, is the least time between the Gets of a key.
	MinInterval time.Duration
	// Observer receives metrics events. Defaults to none.
	Observer QueueObserver
	// AgeLowPriorityAfter is how long a low key waits before it joins the
	// back of the normal line. Defaults to a minute.
	AgeLowPriorityAfter time.Duration
}

// QueueObserver receives a Queue's metrics events, named after the client-go
// workqueue metrics they feed. Methods are called outside the queue's lock,
// by the goroutine calling the queue or by its timer: be fast and goroutine-safe.
type QueueObserver interface {
	Added()                 // a key was queued (adds_total)
	Waited(d time.Duration) // Get handed out a key queued d ago (queue_duration_seconds)
	Worked(d time.Duration) // Done ended a run of d (work_duration_seconds)
	Retried()               // AddRateLimited was called (retries_total)
}

// NewQueue returns an empty queue. It starts no goroutine.
func NewQueue[K comparable](opts QueueOptions[K]) *Queue[K] {
	rl := opts.RateLimiter
	if rl == nil {
		// NewRateLimiter's default (queue_more.go)
		rl = backoff.NewLimiter[K](5*time.Millisecond, 1000*time.Second, 10, 100)
	}
	q := &Queue[K]{
		rl:  rl,
		obs: opts.Observer,
	}
	q.cond.L = &q.mu
	// Defaults and limits: internal/keyqueue.
	pacing := keyqueue.Options{
		Debounce:    opts.Debounce,
		MinInterval: opts.MinInterval,
		Age:         opts.AgeLowPriorityAfter,
	}
	q.keys = keyqueue.New[K](pacing, q.fire)
	return q
}

// Add marks k as needing work. It does nothing after ShutDown.
func (q *Queue[K]) Add(k K) {
	q.add(k, 0, false)
}

// AddAfter adds k once d has passed (d <= 0: Add). A waiting key moves earlier,
// never later, and stops waiting when it is queued at normal priority (by Add,
// or at Done after one), which is earlier. A key queued already when AddAfter
// is called is added again when due (which does nothing if it is still queued).
// A requeue keeps the key's priority: AddAfter (d > 0) of a key that Get
// handed out at low priority, while it is processing, adds it at low
// priority; so does AddRateLimited.
func (q *Queue[K]) AddAfter(k K, d time.Duration) {
	q.add(k, d, false)
}

// AddLowPriority is Add for keys from an informer's initial list or a
// periodic resync: they are handed out after normal keys until they age (see Queue).
func (q *Queue[K]) AddLowPriority(k K) {
	q.add(k, 0, true)
}

// add is Add, AddLowPriority and AddAfter.
func (q *Queue[K]) add(k K, d time.Duration, low bool) {
	q.mu.Lock()
	added := q.keys.Add(k, d, low, time.Now())
	q.unlockAdded(added)
}

// unlockAdded wakes a Get for each of n keys just queued, unlocks q,
// then reports them to the Observer.
func (q *Queue[K]) unlockAdded(n int) {
	for range n {
		q.cond.Signal()
	}
	q.mu.Unlock()
	if q.obs == nil {
		return
	}
	for range n {
		q.obs.Added()
	}
}

// AddRateLimited adds k after the rate limiter's delay for it, counting one
// more failure of k. Call it when work on k failed; call Forget when it worked.
func (q *Queue[K]) AddRateLimited(k K) {
	if q.obs != nil {
		q.obs.Retried()
	}
	q.AddAfter(k, q.rl.When(k))
}

// Forget resets k's backoff. It does not remove k from the queue.
func (q *Queue[K]) Forget(k K) {
	q.rl.Forget(k)
}

// NumRequeues is the number of failures of k the rate limiter counts.
func (q *Queue[K]) NumRequeues(k K) int {
	return q.rl.NumRequeues(k)
}

// Get blocks until a key is ready and hands it out: call Done(k) when finished
// with it. shutdown=true means the queue is shut down: end the worker.
func (q *Queue[K]) Get() (k K, shutdown bool) {
	q.mu.Lock()
	for q.keys.Len() == 0 && !q.keys.Closed() {
		q.cond.Wait()
	}
	if q.keys.Closed() {
		q.mu.Unlock()
		return k, true
	}
	now := time.Now()
	k, since := q.keys.Pop(now)
	q.mu.Unlock()
	if q.obs != nil {
		q.obs.Waited(now.Sub(since))
	}
	return k, false
}

// Done ends the run of k that Get started; if k was added meanwhile, it is
// queued again. Done of a key that is not being processed does nothing.
func (q *Queue[K]) Done(k K) {
	q.mu.Lock()
	now := time.Now()
	added, start, ok := q.keys.Done(k, now)
	if !ok {
		q.mu.Unlock()
		return
	}
	q.unlockAdded(added)
	if q.obs != nil {
		q.obs.Worked(now.Sub(start))
	}
}

// fire runs on the timer: it ends the waits that are due, in order, and
// sets the timer for the next one. A call with none due is harmless.
func (q *Queue[K]) fire() {
	q.mu.Lock()
	added := q.keys.Due(time.Now())
	q.unlockAdded(added)
}

// Len is the number of queued keys (not waiting, not processing), for metrics.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Len()
}

// InFlight reports the keys being processed, for how long in total and
// the longest.
func (q *Queue[K]) InFlight() (n int, unfinished, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.InFlight(time.Now())
}

// How a Queue ends, as client-go's workqueue documents its shutdown:
// ShutDown drops what waits and wakes every Get; ShutDownWithDrain also
// waits for the keys in flight (a controller's graceful stop).

// ShutDown stops the queue: every Get returns shutdown=true from now on, queued
// and waiting keys are dropped, adds do nothing; keys in flight are still Done.
// A ShutDown while ShutDownWithDrain waits ends that wait at once.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys.Shut()
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown, then it waits until every key handed out
// is Done; if ctx ends first, it returns an error wrapping ctx's cause, and
// if ShutDown is called meanwhile, an error at once.
func (q *Queue[K]) ShutDownWithDrain(ctx context.Context) error {
	q.mu.Lock()
	// closed, and the ends of the wait: drained, or a ShutDown's stop
	drained, stop := q.keys.Drain()
	q.cond.Broadcast()
	q.mu.Unlock()
	// nil once drained, else an error counting the keys in flight
	return shutdown.WaitDrained(ctx, drained, stop, q.InFlight)
}

// The RateLimiter behind AddRateLimited; its default, NewRateLimiter, is
// in queue_more.go, its delays in internal/backoff.

// RateLimiter decides how long AddRateLimited waits before adding a key.
// Implementations must be goroutine-safe; the queue calls them outside its lock.
type RateLimiter[K comparable] interface {
	When(k K) time.Duration // counts one more failure of k and returns its delay
	Forget(k K)             // resets k's failure count
	NumRequeues(k K) int    // k's failure count
}

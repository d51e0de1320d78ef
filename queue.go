package kctl

// The Queue: its line (internal/keyline), processing, delays
// (internal/keywait) and pacing; how it ends (ShutDown,
// ShutDownWithDrain); and the RateLimiter of AddRateLimited.

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/backoff"
	"github.com/kctl-dev/kctl/internal/keyline"
	"github.com/kctl-dev/kctl/internal/keywait"
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

	// queued holds every key that waits in line to be handed out, with
	// when it was queued: Get reports the wait since then, and a low key
	// ages from then. A queued key is not in processing.
	queued map[K]time.Time
	// line is the order the queued keys are handed out in: a FIFO until
	// the first AddLowPriority makes it a Priority line. It holds each
	// queued key once, and knows which are low (not raised).
	line keyline.Line[K]
	// processing holds every key handed out by Get and not yet Done,
	// with when Get handed it out.
	processing map[K]time.Time
	// heldLow holds the processing keys Get took at low priority: an
	// AddAfter or AddRateLimited of one while it is processing (a
	// requeue) waits to be queued at low priority again. Every key in
	// heldLow is in processing.
	heldLow map[K]bool
	// dirty holds the keys added while processing, to be queued again at
	// Done; true if every add since Get was low. Every key in dirty is in
	// processing.
	dirty map[K]bool

	// waiting holds the keys that wait for a time; its timer calls fire.
	// A key may wait to be added while it is queued or processing; a key
	// held (a wait without add) is neither. After Done, a key's wait
	// keeps its MinInterval's end (NotBefore); while it is processing,
	// processing holds its start.
	waiting keywait.Waits[K]

	// shuttingDown is set once, by ShutDown. Then queued, dirty and
	// waiting are empty and stay so.
	shuttingDown bool
	// drained is closed once shuttingDown is set and no key is processing.
	drained chan struct{}
	// stopDrain is closed by a ShutDown while ShutDownWithDrain waits,
	// to end the wait; nil when none waits.
	stopDrain chan struct{}

	debounce    time.Duration
	minInterval time.Duration
	age         time.Duration
	rl          RateLimiter[K]
	obs         QueueObserver
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
		rl = NewRateLimiter[K](5*time.Millisecond, 1000*time.Second, 10, 100)
	}
	age := max(opts.AgeLowPriorityAfter, 0)
	q := &Queue[K]{
		queued:      map[K]time.Time{},
		line:        &keyline.FIFO[K]{},
		processing:  map[K]time.Time{},
		heldLow:     map[K]bool{},
		dirty:       map[K]bool{},
		drained:     make(chan struct{}),
		debounce:    max(opts.Debounce, 0),
		minInterval: max(opts.MinInterval, 0),
		age:         cmp.Or(age, time.Minute),
		rl:          rl,
		obs:         opts.Observer,
	}
	q.cond.L = &q.mu
	q.waiting.Fire = q.fire
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
	q.mu.Lock()
	f, ok := q.line.(*keyline.FIFO[K])
	if ok { // the first: its keys keep their order, at normal priority
		q.line = keyline.NewPriority(f, q.age)
	}
	q.mu.Unlock()
	q.add(k, 0, true)
}

// add is Add, AddLowPriority and AddAfter.
func (q *Queue[K]) add(k K, d time.Duration, low bool) {
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		return
	}
	_, queued := q.queued[k]
	// Stingy: a low add of a queued key changes nothing. A normal one
	// may raise it (readyLocked).
	if queued && d <= 0 && low {
		q.mu.Unlock()
		return
	}
	now := time.Now()
	// A requeue keeps the priority Get handed k out with.
	waitLow := q.heldLow[k]
	if d <= 0 && !low && !queued {
		d = q.debounce
		waitLow = false
	}
	if d > 0 {
		q.waiting.Set(k, now.Add(d), true, waitLow, now)
		q.mu.Unlock()
		return
	}
	w, _ := q.waiting.Get(k)
	added := q.readyLocked(k, low, w.NotBefore, now)
	q.unlockAdded(added)
}

// readyLocked is where every add ends up, and Done of a key added
// while processing, and a wait that ends. It returns 1 if it queued k,
// else 0. A processing key becomes dirty; a queued low key is raised by a
// normal add unless it aged; a key before notBefore (its MinInterval's
// end) waits; any other is queued, and if normal, stops waiting.
func (q *Queue[K]) readyLocked(k K, low bool, notBefore, now time.Time) int {
	if _, ok := q.processing[k]; ok {
		q.dirtyLocked(k, low)
		return 0
	}
	if since, ok := q.queued[k]; ok {
		if !low {
			q.line.Raise(k, since, now)
		}
		return 0
	}
	if now.Before(notBefore) {
		// The hold keeps notBefore on the wait to add.
		q.waiting.Set(k, notBefore, false, false, now)
		q.waiting.Set(k, notBefore, true, low, now)
		return 0
	}
	q.queued[k] = now
	q.line.Push(k, low, now)
	if !low { // queued now, which is earlier than the wait's end
		q.waiting.Remove(k)
	}
	q.cond.Signal()
	return 1
}

// dirtyLocked marks processing key k to be queued again at Done, low
// only if every add since Get was low.
func (q *Queue[K]) dirtyLocked(k K, low bool) {
	if !low {
		q.dirty[k] = false
		return
	}
	if _, ok := q.dirty[k]; !ok {
		q.dirty[k] = true
	}
}

// unlockAdded unlocks q, then reports n keys queued to the Observer.
func (q *Queue[K]) unlockAdded(n int) {
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
	for len(q.queued) == 0 && !q.shuttingDown {
		q.cond.Wait()
	}
	if q.shuttingDown {
		q.mu.Unlock()
		return k, true
	}
	k, low := q.line.Pop()
	since := q.queued[k]
	if low {
		q.heldLow[k] = true
	}
	delete(q.queued, k)
	now := time.Now()
	q.processing[k] = now
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
	start, ok := q.processing[k]
	if !ok {
		q.mu.Unlock()
		return
	}
	now := time.Now()
	delete(q.processing, k)
	delete(q.heldLow, k)
	low, dirty := q.dirty[k]
	delete(q.dirty, k)
	added := 0
	next := start.Add(q.minInterval)
	if dirty {
		added = q.readyLocked(k, low, next, now)
	} else if !q.shuttingDown && now.Before(next) {
		// A hold: it keeps k's MinInterval end for the next add.
		q.waiting.Set(k, next, false, false, now)
	}
	if q.shuttingDown && len(q.processing) == 0 {
		close(q.drained)
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
	now := time.Now()
	added := 0
	for w := range q.waiting.Due(now) {
		if w.Add {
			added += q.readyLocked(w.Key, w.Low, w.NotBefore, now)
		}
	}
	q.unlockAdded(added)
}

// Len is the number of queued keys (not waiting, not processing), for metrics.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// InFlight reports the keys being processed, for how long in total and
// the longest.
func (q *Queue[K]) InFlight() (n int, unfinished, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	for _, start := range q.processing {
		d := now.Sub(start)
		unfinished += d
		longest = max(longest, d)
	}
	return len(q.processing), unfinished, longest
}

// How a Queue ends: ShutDown drops what waits and wakes every Get;
// ShutDownWithDrain also waits for the keys in flight. The layer on top
// of queue.go, as client-go's workqueue documents its shutdown.

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

// The RateLimiter behind AddRateLimited; its default's delays are
// internal/backoff.

// RateLimiter decides how long AddRateLimited waits before adding a key.
// Implementations must be goroutine-safe; the queue calls them outside its lock.
type RateLimiter[K comparable] interface {
	When(k K) time.Duration // counts one more failure of k and returns its delay
	Forget(k K)             // resets k's failure count
	NumRequeues(k K) int    // k's failure count
}

// NewRateLimiter delays a key by the larger of its exponential backoff (base *
// 2^failures capped at max; failures counts its When calls since its Forget;
// base 0: none) and a token bucket shared by all keys (burst tokens refilled at
// qps per second, one taken by each When; qps <= 0: none).
//
// Every Queue and Controller defaults to controller-runtime's (and client-go's
// DefaultTypedControllerRateLimiter) limits:
//
//	kctl.NewRateLimiter[kctl.Key](5*time.Millisecond, 1000*time.Second, 10, 100)
//
// that is 5 ms, 10 ms, 20 ms, ... up to 1000 s (reached at the 19th failure
// in a row), and at most 100 retries at once, then 10 per second.
func NewRateLimiter[K comparable](base, max time.Duration, qps float64, burst int) RateLimiter[K] {
	return backoff.NewLimiter[K](base, max, qps, burst)
}

// What a Queue tells of itself beyond the data path (floor 2): whether it
// shuts down, and when a waiting key comes back (for KeepHistory). The
// data path (queue.go) calls neither.

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// WaitingUntil reports when k's wait to be added ends, if k waits
// (AddAfter, AddRateLimited, Debounce, MinInterval).
func (q *Queue[K]) WaitingUntil(k K) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.waiting.Get(k)
	if !ok || !w.Add {
		return time.Time{}, false
	}
	return w.At, true
}

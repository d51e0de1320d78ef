package kctl

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
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
	mu         sync.Mutex
	cond       sync.Cond    // L is &mu; signalled once per key queued, broadcast at shutdown
	index      map[K]uint32 // key -> slot; holds exactly the slots with fUsed
	slots      []slot[K]    // freed slots are zeroed and listed in free
	free       []uint32
	normal     fifo        // queued normal keys by join time (at; 0 while low was empty), each a slot with fQueued and not fLow
	low        fifo        // queued low keys; an item is live iff its slot has fQueued|fLow and its seq
	n          int         // queued keys: normal.len() + live items in low
	wait       []item      // binary min-heap on (at, seq) of the slots with fWaiting; slots[wait[j].idx].pos == j
	seq        uint64      // last seq given to a low or wait item
	timer      *time.Timer // the one AfterFunc timer serving wait
	armed      bool        // timer fires at armedAt, and armedAt <= wait[0].at
	armedAt    int64
	processing int                                // slots with fProcessing
	last       uint32                             // slot Get handed out last (findLocked tries it first)
	hot        atomic.Pointer[map[K]*atomic.Bool] // key -> its slot.hot (or a dead one, false); read without mu, replaced whole
	fresh      []hotEntry[K]                      // slot.hot flags made since hot was built
	shutdown   bool                               // set once; then n == 0, wait is empty, no slot is queued, dirty or waiting
	drained    chan struct{}                      // made at shutdown, closed once processing is 0
	epoch      time.Time                          // origin of the int64 times (ns, monotonic)
	timed      bool                               // Get and Done read the clock (Observer or MinInterval)

	debounce, minInterval, age int64
	rl                         RateLimiter[K]
	obs                        QueueObserver
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
	// Observer receives metrics events. Defaults to none; then Add (without
	// delay or low priority), Get and Done never read the clock.
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
	q := &Queue[K]{index: map[K]uint32{}, epoch: time.Now(), obs: opts.Observer,
		rl:    cmp.Or(opts.RateLimiter, NewRateLimiter[K](5*time.Millisecond, 1000*time.Second, 10, 100)),
		timed: opts.Observer != nil || opts.MinInterval > 0, debounce: int64(max(opts.Debounce, 0)),
		minInterval: int64(max(opts.MinInterval, 0)), age: int64(cmp.Or(max(opts.AgeLowPriorityAfter, 0), time.Minute))}
	q.cond.L = &q.mu
	q.hot.Store(new(map[K]*atomic.Bool))
	return q
}

// now is the time since q.epoch in ns if need is true, else 0 (no clock read).
func (q *Queue[K]) now(need bool) int64 {
	if !need {
		return 0
	}
	return int64(time.Since(q.epoch))
}

// Add marks k as needing work. It does nothing after ShutDown.
func (q *Queue[K]) Add(k K) { q.add(k, 0, false) }

// AddLowPriority is Add for keys from an informer's initial list or a
// periodic resync: they are handed out after normal keys until they age (see Queue).
func (q *Queue[K]) AddLowPriority(k K) { q.add(k, 0, true) }

// AddAfter adds k once d has passed (d <= 0: Add). A waiting key moves earlier,
// never later, and stops waiting when it is queued at normal priority (by Add,
// or at Done after one), which is earlier. A key queued already when AddAfter
// is called is added again when due (which does nothing if it is still queued).
func (q *Queue[K]) AddAfter(k K, d time.Duration) { q.add(k, d, false) }

func (q *Queue[K]) add(k K, d time.Duration, low bool) {
	// Under load most adds are of a queued key and change nothing (Stingy):
	// once such an add put the key in q.hot, the next ones need no lock.
	if d <= 0 && !low {
		if h := (*q.hot.Load())[k]; h != nil && h.Load() {
			return
		}
	}
	q.mu.Lock()
	i, ok := q.findLocked(k)
	if q.shutdown || ok && d <= 0 && q.slots[i].flags&fQueued != 0 && (low || q.slots[i].flags&fLow == 0) { // changes nothing
		if !q.shutdown && q.slots[i].hot == nil {
			q.publishLocked(i)
		}
		q.mu.Unlock()
		return
	}
	if !ok {
		i = q.allocLocked(k)
	}
	if d <= 0 && !low && q.slots[i].flags&fQueued == 0 {
		d = time.Duration(q.debounce)
	}
	now := q.now(q.timed || d > 0 || low || q.low.len() > 0)
	if d <= 0 {
		q.unlockAdded(q.readyLocked(i, low, now))
		return
	}
	q.waitLocked(i, min(now, math.MaxInt64-int64(d))+int64(d), fWaitAdd, now) // now+d, saturated
	q.unlockAdded(q.dueLocked(now))                                           // spare the timer the keys already due
}

// unlockAdded unlocks q, then reports n queued keys to the Observer.
func (q *Queue[K]) unlockAdded(n int) {
	q.mu.Unlock()
	for ; n > 0 && q.obs != nil; n-- {
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
func (q *Queue[K]) Forget(k K) { q.rl.Forget(k) }

// NumRequeues is the number of failures of k the rate limiter counts.
func (q *Queue[K]) NumRequeues(k K) int { return q.rl.NumRequeues(k) }

// Get blocks until a key is ready and hands it out: call Done(k) when finished
// with it. shutdown=true means the queue is shut down: end the worker.
func (q *Queue[K]) Get() (k K, shutdown bool) {
	q.mu.Lock()
	for q.n == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		q.mu.Unlock()
		return k, true
	}
	q.last = q.popLocked()
	s := &q.slots[q.last]
	s.flags = s.flags&^(fQueued|fLow) | fProcessing
	s.mirror()
	q.n--
	q.processing++
	s.startedAt = q.now(q.timed) // 0 is as good as long ago when MinInterval is 0
	k = s.key
	waited := time.Duration(s.startedAt - s.addedAt) // used with an Observer only, so timed
	q.mu.Unlock()
	if q.obs != nil {
		q.obs.Waited(waited)
	}
	return k, false
}

// Done ends the run of k that Get started; if k was added meanwhile, it is
// queued again. Done of a key that is not being processed does nothing.
func (q *Queue[K]) Done(k K) {
	q.mu.Lock()
	i, ok := q.findLocked(k)
	if !ok || q.slots[i].flags&fProcessing == 0 {
		q.mu.Unlock()
		return
	}
	s := &q.slots[i]
	dirty := s.flags&fDirty != 0
	low := s.flags&fLow != 0
	s.flags &^= fProcessing | fDirty | fLow
	q.processing--
	now := q.now(q.timed || dirty && (low || q.low.len() > 0))
	worked := time.Duration(now - s.startedAt)
	added := 0
	switch {
	case dirty: // never after ShutDown, which clears fDirty
		added = q.readyLocked(i, low, now)
	case q.shutdown && q.processing == 0:
		close(q.drained)
	case !q.shutdown && now < s.startedAt+q.minInterval: // keep startedAt to pace the next add
		q.waitLocked(i, s.startedAt+q.minInterval, 0, now)
	}
	q.idleLocked(i)
	q.unlockAdded(added)
	if q.obs != nil {
		q.obs.Worked(worked)
	}
}

// Len is the number of queued keys (not waiting, not processing), for metrics.
func (q *Queue[K]) Len() int { q.mu.Lock(); defer q.mu.Unlock(); return q.n }

// InFlight reports the keys being processed, for how long in total and the
// longest. Durations are 0 unless the queue has an Observer or MinInterval.
func (q *Queue[K]) InFlight() (n int, unfinished, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now(true)
	for i := 0; i < len(q.slots) && q.timed; i++ {
		if s := &q.slots[i]; s.flags&fProcessing != 0 {
			unfinished += time.Duration(now - s.startedAt)
			longest = max(longest, time.Duration(now-s.startedAt))
		}
	}
	return q.processing, unfinished, longest
}

// ShutDown stops the queue: every Get returns shutdown=true from now on, queued
// and waiting keys are dropped, adds do nothing; keys in flight are still Done.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	q.shutdown = true
	q.armed = false
	q.drained = make(chan struct{})
	if q.processing == 0 {
		close(q.drained)
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	for i := range q.slots { // keep only processing keys
		q.slots[i].flags &= fUsed | fProcessing
		q.slots[i].mirror()
		q.idleLocked(uint32(i))
	}
	q.normal = fifo{}
	q.low = fifo{}
	q.wait = nil
	q.n = 0
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown, then it waits until every key handed out
// is Done; if ctx ends first, it returns an error wrapping ctx's cause.
func (q *Queue[K]) ShutDownWithDrain(ctx context.Context) error {
	q.ShutDown()
	select {
	case <-q.drained: // set by ShutDown, never changed
		return nil
	case <-ctx.Done():
		n, _, _ := q.InFlight()
		return fmt.Errorf("kctl: queue drain stopped with %d keys still in flight (is a worker stuck or missing a Done?): %w", n, unprefixed(context.Cause(ctx)))
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[K]) ShuttingDown() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.shutdown }

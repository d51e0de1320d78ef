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

// Slot flags. A queued slot is neither processing nor dirty; fLow qualifies
// fQueued (its live item is in low) or fDirty (only low adds came in).
const (
	fUsed       uint8 = 1 << iota // slot belongs to key
	fQueued                       // in normal or low; counted in n
	fLow                          // see above
	fProcessing                   // handed out by Get, not yet Done
	fDirty                        // added while processing: queued again at Done
	fWaiting                      // in wait at pos
	fWaitAdd                      // with fWaiting: made ready when due; else only kept until MinInterval passed
)

type slot[K comparable] struct {
	key       K
	flags     uint8
	pos       int32        // fWaiting: index in wait
	seq       uint64       // fQueued|fLow: seq of the live item in low
	addedAt   int64        // fQueued: when it was queued (set when timed or low)
	startedAt int64        // when Get last handed it out (set when timed; long ago for a new slot)
	hot       *atomic.Bool // nil or flags&(fQueued|fLow) == fQueued, for add to read without mu
}

// mirror updates s.hot; call it after each change of fQueued or fLow.
func (s *slot[K]) mirror() {
	if s.hot != nil {
		s.hot.Store(s.flags&(fQueued|fLow) == fQueued)
	}
}

// item is an element of wait (due at at), normal (joined at at) or low.
type item struct {
	at  int64
	seq uint64
	idx uint32
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
	q.n, q.processing = q.n-1, q.processing+1
	s.startedAt = q.now(q.timed)                             // 0 is as good as long ago when MinInterval is 0
	k, waited := s.key, time.Duration(s.startedAt-s.addedAt) // used with an Observer only, so timed
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
	dirty, low := s.flags&fDirty != 0, s.flags&fLow != 0
	s.flags &^= fProcessing | fDirty | fLow
	q.processing--
	now := q.now(q.timed || dirty && (low || q.low.len() > 0))
	worked, added := time.Duration(now-s.startedAt), 0
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
	for i, now := 0, q.now(true); i < len(q.slots) && q.timed; i++ {
		if s := &q.slots[i]; s.flags&fProcessing != 0 {
			unfinished, longest = unfinished+time.Duration(now-s.startedAt), max(longest, time.Duration(now-s.startedAt))
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
	q.shutdown, q.armed, q.drained = true, false, make(chan struct{})
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
	q.normal, q.low, q.wait, q.n = fifo{}, fifo{}, nil, 0
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

// findLocked is q.index[k], but first tries the slot Get handed out last: a
// worker mostly passes back the key it just got (AddAfter, AddRateLimited, Done).
func (q *Queue[K]) findLocked(k K) (uint32, bool) {
	if int(q.last) < len(q.slots) && q.slots[q.last].flags != 0 && q.slots[q.last].key == k {
		return q.last, true
	}
	i, ok := q.index[k]
	return i, ok
}

func (q *Queue[K]) allocLocked(k K) uint32 {
	if len(q.free) == 0 {
		q.free, q.slots = append(q.free, uint32(len(q.slots))), append(q.slots, slot[K]{})
	}
	i := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	q.slots[i], q.index[k] = slot[K]{key: k, flags: fUsed, startedAt: math.MinInt64 / 2}, i
	return i
}

// idleLocked frees slot i if nothing holds it any more.
func (q *Queue[K]) idleLocked(i uint32) {
	if s := &q.slots[i]; s.flags == fUsed {
		delete(q.index, s.key)
		q.slots[i], q.free = slot[K]{}, append(q.free, i)
	}
}

// readyLocked is where every add ends up: a processing key is marked dirty, a queued low key is
// raised by a normal add, one within MinInterval of its last start waits, any other is queued (1)
// and, if normal, leaves wait.
func (q *Queue[K]) readyLocked(i uint32, low bool, now int64) int {
	s := &q.slots[i]
	switch {
	case s.flags&fProcessing != 0: // low at Done only if every add meanwhile was low
		keepLow := low && s.flags&(fDirty|fLow) != fDirty
		if s.flags = s.flags&^fLow | fDirty; keepLow {
			s.flags |= fLow
		}
		return 0
	case s.flags&fQueued != 0: // a normal add raises a low key that has not aged; its low item dies
		if !low && s.flags&fLow != 0 && now-s.addedAt < q.age {
			s.flags &^= fLow
			s.mirror()
			q.normal.push(item{at: now, idx: i})
		}
		return 0
	case now < s.startedAt+q.minInterval:
		q.waitLocked(i, s.startedAt+q.minInterval, fWaitAdd, now)
		return 0
	}
	if s.flags |= fQueued; low {
		q.seq++
		s.seq, s.flags = q.seq, s.flags|fLow
		q.low.push(item{seq: q.seq, idx: i})
	} else if q.normal.push(item{at: now, idx: i}); s.flags&fWaiting != 0 {
		q.unwaitLocked(i) // queued now, which is earlier than due
	}
	s.addedAt, q.n = now, q.n+1
	s.mirror()
	q.cond.Signal()
	return 1
}

// publishLocked gives slot i a hot flag: the one its key had in q.hot (unused
// since its slot was freed) or a new one, listed in fresh until the next rebuild
// of q.hot, which keeps the flags of idle keys for their next slot unless they
// outnumber the keys in use.
func (q *Queue[K]) publishLocked(i uint32) {
	s, m := &q.slots[i], *q.hot.Load()
	if s.hot = m[s.key]; s.hot == nil {
		s.hot = new(atomic.Bool)
		q.fresh = append(q.fresh, hotEntry[K]{s.key, s.hot})
		if len(q.fresh) > len(m)/8 { // amortized O(8) per new flag
			prune := len(m) > 2*len(q.slots)+1024
			n := make(map[K]*atomic.Bool, len(m)+len(q.fresh))
			for k, h := range m {
				if _, ok := q.index[k]; !prune || ok {
					n[k] = h
				}
			}
			for _, e := range q.fresh {
				if j, ok := q.index[e.key]; ok && q.slots[j].hot == e.hot { // the live flag wins
					n[e.key] = e.hot
				} else if !prune && n[e.key] == nil {
					n[e.key] = e.hot
				}
			}
			q.hot.Store(&n)
			clear(q.fresh)
			q.fresh = q.fresh[:0]
		}
	}
	s.mirror()
}

type hotEntry[K comparable] struct {
	key K
	hot *atomic.Bool
}

func (q *Queue[K]) liveLow(e item) bool {
	s := &q.slots[e.idx]
	return s.flags&(fQueued|fLow) == fQueued|fLow && s.seq == e.seq
}

// popLocked takes the next key (q.n > 0): the head of low if normal is empty
// or the low key aged before the head of normal joined, else the head of normal.
func (q *Queue[K]) popLocked() uint32 {
	for q.low.len() > 0 && !q.liveLow(q.low.buf[q.low.head]) {
		q.low.pop()
	}
	if q.low.len() > 0 && (q.normal.len() == 0 || q.normal.buf[q.normal.head].at-q.slots[q.low.buf[q.low.head].idx].addedAt >= q.age) {
		return q.low.pop().idx
	}
	return q.normal.pop().idx
}

// waitLocked puts slot i in the heap, due at at: with add == fWaitAdd, to be
// made ready (an earlier add wins); with 0, only to keep the slot (MinInterval).
func (q *Queue[K]) waitLocked(i uint32, at int64, add uint8, now int64) {
	s := &q.slots[i]
	if s.flags&fWaiting == 0 {
		s.pos = int32(len(q.wait))
		q.wait = append(q.wait, item{})
	} else if s.flags&fWaitAdd != 0 && (add == 0 || at >= q.wait[s.pos].at) {
		return
	}
	q.seq++
	q.wait[s.pos], s.flags = item{at, q.seq, i}, s.flags|fWaiting|add
	q.siftLocked(int(s.pos))
	q.armLocked(now)
}

// armLocked makes the timer fire when wait[0] is due.
func (q *Queue[K]) armLocked(now int64) {
	if len(q.wait) > 0 && (!q.armed || q.armedAt > q.wait[0].at) {
		if q.timer == nil {
			q.timer = time.AfterFunc(math.MaxInt64, q.fire)
		}
		q.armed, q.armedAt = true, q.wait[0].at
		q.timer.Reset(time.Duration(q.armedAt - now))
	}
}

// fire runs on the timer. A spurious call is harmless.
func (q *Queue[K]) fire() {
	q.mu.Lock()
	q.armed = false
	q.unlockAdded(q.dueLocked(q.now(true)))
}

// dueLocked makes the keys due by now ready, in (at, seq) order, re-arms
// the timer for the next one and reports how many keys it queued.
func (q *Queue[K]) dueLocked(now int64) (added int) {
	for len(q.wait) > 0 && q.wait[0].at <= now {
		i := q.wait[0].idx
		add := q.slots[i].flags&fWaitAdd != 0
		if q.unwaitLocked(i); add {
			added += q.readyLocked(i, false, now)
		}
		q.idleLocked(i)
	}
	q.armLocked(now)
	return added
}

// unwaitLocked takes slot i out of wait.
func (q *Queue[K]) unwaitLocked(i uint32) {
	j, last := int(q.slots[i].pos), len(q.wait)-1
	q.slots[i].flags &^= fWaiting | fWaitAdd
	if q.wait[j], q.wait = q.wait[last], q.wait[:last]; j < last {
		q.siftLocked(j)
	}
}

// siftLocked moves wait[j] up or down to its place in the heap.
func (q *Queue[K]) siftLocked(j int) {
	w, e := q.wait, q.wait[j]
	for ; j > 0 && e.before(&w[(j-1)/2]); j = (j - 1) / 2 {
		q.putLocked(j, w[(j-1)/2])
	}
	for c := 2*j + 1; c < len(w); c = 2*j + 1 {
		if c+1 < len(w) { // take the earlier child without a branch: it is unpredictable
			d := 0
			if w[c+1].at < w[c].at {
				d = 1
			}
			if w[c+1].at == w[c].at && w[c+1].seq < w[c].seq {
				d = 1
			}
			c += d
		}
		if !w[c].before(&e) {
			break
		}
		q.putLocked(j, w[c])
		j = c
	}
	q.putLocked(j, e)
}

func (q *Queue[K]) putLocked(j int, e item) { q.wait[j], q.slots[e.idx].pos = e, int32(j) }

func (e *item) before(f *item) bool { return e.at < f.at || e.at == f.at && e.seq < f.seq }

// fifo is a queue on a slice: a push shifts the rest down once half of the
// slice is popped, so push and pop are O(1) amortized.
type fifo struct {
	buf  []item
	head int
}

func (f *fifo) len() int { return len(f.buf) - f.head }

func (f *fifo) push(e item) {
	if f.head > 0 && f.head >= len(f.buf)/2 {
		f.buf, f.head = f.buf[:copy(f.buf, f.buf[f.head:])], 0
	}
	f.buf = append(f.buf, e)
}

func (f *fifo) pop() item { f.head++; return f.buf[f.head-1] }

package kctl

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Queue is the work queue between event handlers and workers: handlers Add
// keys, a worker takes one with Get, works on it and hands it back with Done.
//
//	q := kctl.NewQueue(kctl.QueueOptions[string]{})
//	q.Add("default/web")
//	k, shutdown := q.Get() // blocks until a key is ready
//	if !shutdown {
//		if err := work(k); err != nil {
//			q.AddRateLimited(k) // retry after the key's backoff
//		} else {
//			q.Forget(k) // reset the key's backoff
//		}
//		q.Done(k)
//	}
//
// Guarantees:
//   - Fair: keys are handed out in the order they became ready.
//   - Stingy: a key added many times before a worker takes it is handed out once.
//   - Exclusive: a key is never held by two workers. A key added while it is
//     being processed is held back until Done, then queued once more.
//   - Shutdown: ShutDown wakes every Get; from then on Get returns
//     shutdown=true at once, keys still queued or waiting are dropped and adds
//     are no-ops. ShutDownWithDrain also waits for the keys in flight to be Done.
//   - Delays: AddAfter keeps waiting keys in one min-heap served by one timer.
//     Adding a waiting key earlier moves it earlier; later never postpones it.
//   - Priority: AddLowPriority keys are handed out after normal ones, in their
//     own FIFO order. A low key queued for AgeLowPriorityAfter joins the back of
//     the normal line, so none starves. Add of a queued low key raises it.
//   - Pacing: with Debounce, Add makes a key ready Debounce later, so a burst of
//     adds is one run; with MinInterval, two runs of a key start at least
//     MinInterval apart.
//
// The zero Queue is not usable: make one with NewQueue, which starts no
// goroutine (the delay timer is created on first use). All methods are safe
// for concurrent use.
type Queue[K comparable] struct {
	mu   sync.Mutex
	cond sync.Cond // L is &mu; signalled once per key queued, broadcast at shutdown

	index map[K]uint32 // key -> slot; holds exactly the slots with fUsed
	slots []slot[K]    // freed slots are zeroed and listed in free
	free  []uint32

	normal ring[uint32]   // queued normal keys, FIFO; every entry is a queued slot without fLow
	low    ring[lowEntry] // queued low keys, FIFO by addedAt; an entry is live iff its slot has fQueued|fLow and its seq
	n      int            // queued keys: len(normal) + live entries of low
	wait   []waitEntry    // min-heap on (at, seq); an entry is live iff its slot has fWaiting and its seq
	stale  int            // dead entries in wait
	seq    uint64         // last seq given to a low or wait entry

	timer   *time.Timer // the one AfterFunc timer serving wait
	armed   bool        // timer will fire at armedAt or earlier
	armedAt int64

	processing int           // slots with fProcessing
	shutdown   bool          // set once; then n == 0, wait is empty and no slot is queued, dirty or waiting
	drained    chan struct{} // closed by the Done that ends the last processing after shutdown

	epoch       time.Time // origin of the int64 times below (ns, monotonic)
	timed       bool      // Get and Done read the clock: Observer or MinInterval set
	debounce    int64
	minInterval int64
	age         int64
	rl          RateLimiter[K]
	obs         QueueObserver
}

// Slot flags. A queued slot is neither processing nor dirty; fLow qualifies
// fQueued (the live entry is in low) or fDirty (only low adds came in).
const (
	fUsed       uint8 = 1 << iota // slot belongs to key
	fQueued                       // in normal or low; counted in n
	fLow                          // see above
	fProcessing                   // handed out by Get, not yet Done
	fDirty                        // added while processing: queued again at Done
	fWaiting                      // has a live entry in wait, due at waitAt
	fWaitAdd                      // with fWaiting: the entry makes the key ready; without, it only keeps startedAt until MinInterval has passed
)

const neverStarted = math.MinInt64 / 2

type slot[K comparable] struct {
	key       K
	flags     uint8
	lowSeq    uint64 // fQueued|fLow: seq of the live entry in low
	waitSeq   uint64 // fWaiting: seq of the live entry in wait
	waitAt    int64  // fWaiting: when it is due
	addedAt   int64  // fQueued: when it was queued (set when timed or low)
	startedAt int64  // when Get last handed it out (set when timed)
}

type lowEntry struct {
	seq uint64
	idx uint32
}

type waitEntry struct {
	at  int64
	seq uint64
	idx uint32
}

// QueueOptions configures NewQueue. The zero value gives client-go's
// behaviour: DefaultRateLimiter, no pacing, no observer.
type QueueOptions[K comparable] struct {
	// RateLimiter decides how long AddRateLimited waits. Defaults to DefaultRateLimiter.
	RateLimiter RateLimiter[K]
	// Debounce, when > 0, makes Add of a key that is not queued schedule it
	// Debounce later (like AddAfter), so a burst of adds is handed out once.
	// Add of a queued key and AddLowPriority are not delayed. Defaults to 0.
	Debounce time.Duration
	// MinInterval, when > 0, is the least time between the starts (Gets) of
	// two runs of one key: an add arriving sooner waits until then. Defaults to 0.
	MinInterval time.Duration
	// Observer receives metrics events. Defaults to none; then Get and Add
	// never read the clock and InFlight reports no durations.
	Observer QueueObserver
	// AgeLowPriorityAfter is how long a low-priority key waits before it joins
	// the back of the normal line. Defaults to DefaultAgeLowPriorityAfter.
	AgeLowPriorityAfter time.Duration
}

// DefaultAgeLowPriorityAfter is one minute: long enough for live events to
// go ahead of the initial list's backlog after a restart, short enough that a
// flood of events cannot hold a key back for long.
const DefaultAgeLowPriorityAfter = time.Minute

// QueueObserver receives a Queue's metrics events, named after the client-go
// workqueue metrics they feed. Methods are called outside the queue's lock by
// the goroutine calling the queue, so they must be fast and goroutine-safe.
type QueueObserver interface {
	Added()                 // a key was queued (adds_total)
	Waited(d time.Duration) // Get handed out a key queued d ago (queue_duration_seconds)
	Worked(d time.Duration) // Done ended a run of d (work_duration_seconds)
	Retried()               // AddRateLimited was called (retries_total)
}

// NewQueue returns an empty queue. It starts no goroutine.
func NewQueue[K comparable](opts QueueOptions[K]) *Queue[K] {
	q := &Queue[K]{
		index:       map[K]uint32{},
		epoch:       time.Now(),
		timed:       opts.Observer != nil || opts.MinInterval > 0,
		debounce:    int64(max(opts.Debounce, 0)),
		minInterval: int64(max(opts.MinInterval, 0)),
		age:         int64(opts.AgeLowPriorityAfter),
		rl:          opts.RateLimiter,
		obs:         opts.Observer,
	}
	q.cond.L = &q.mu
	if q.rl == nil {
		q.rl = DefaultRateLimiter[K]()
	}
	if q.age <= 0 {
		q.age = int64(DefaultAgeLowPriorityAfter)
	}
	return q
}

func (q *Queue[K]) now() int64 { return int64(time.Since(q.epoch)) }

// Add marks k as needing work. It does nothing after ShutDown.
func (q *Queue[K]) Add(k K) { q.add(k, false) }

// AddLowPriority is Add for keys of an informer's initial list: they are
// handed out after normal keys until they age (see Queue).
func (q *Queue[K]) AddLowPriority(k K) { q.add(k, true) }

func (q *Queue[K]) add(k K, low bool) {
	q.mu.Lock()
	i, ok := q.index[k]
	if q.shutdown || ok && q.slots[i].flags&fQueued != 0 && (low || q.slots[i].flags&fLow == 0) {
		q.mu.Unlock() // the common duplicate: nothing to do
		return
	}
	if !ok {
		i = q.allocLocked(k)
	}
	var now int64
	if q.timed || low || q.debounce > 0 || q.low.n > 0 {
		now = q.now()
	}
	added := false
	if q.debounce > 0 && !low && q.slots[i].flags&fQueued == 0 {
		q.waitLocked(i, now+q.debounce, true, now)
	} else {
		added = q.readyLocked(i, low, now)
	}
	q.mu.Unlock()
	if added && q.obs != nil {
		q.obs.Added()
	}
}

// AddAfter adds k once d has passed; d <= 0 is Add. If k is already waiting
// to be added sooner, AddAfter does nothing; if later, k is moved earlier. A
// waiting key is added when due even if it was queued or processed meanwhile.
func (q *Queue[K]) AddAfter(k K, d time.Duration) {
	if d <= 0 {
		q.Add(k)
		return
	}
	q.mu.Lock()
	if !q.shutdown {
		i, ok := q.index[k]
		if !ok {
			i = q.allocLocked(k)
		}
		now := q.now()
		at := now + int64(d)
		if at < now {
			at = math.MaxInt64
		}
		q.waitLocked(i, at, true, now)
	}
	q.mu.Unlock()
}

// AddRateLimited adds k after the delay the rate limiter gives it, which
// counts one more failure of k. Call it when work on k failed, and Forget
// when it succeeded.
func (q *Queue[K]) AddRateLimited(k K) {
	if q.ShuttingDown() {
		return
	}
	d := q.rl.When(k)
	if q.obs != nil {
		q.obs.Retried()
	}
	q.AddAfter(k, d)
}

// Forget resets k's backoff in the rate limiter. It does not remove k from
// the queue.
func (q *Queue[K]) Forget(k K) { q.rl.Forget(k) }

// NumRequeues is the number of failures of k the rate limiter counts.
func (q *Queue[K]) NumRequeues(k K) int { return q.rl.NumRequeues(k) }

// Get blocks until a key is ready and hands it to the caller, who must call
// Done(k) when finished with it. shutdown=true means the queue is shut down:
// end the worker.
func (q *Queue[K]) Get() (k K, shutdown bool) {
	k, _, shutdown = q.get(true)
	return k, shutdown
}

// get is Get; with block=false it returns ok=false instead of waiting.
func (q *Queue[K]) get(block bool) (k K, ok, shutdown bool) {
	q.mu.Lock()
	for q.n == 0 && !q.shutdown {
		if !block {
			q.mu.Unlock()
			return k, false, false
		}
		q.cond.Wait()
	}
	if q.shutdown {
		q.mu.Unlock()
		return k, false, true
	}
	i := q.popLocked()
	s := &q.slots[i]
	s.flags = s.flags&^fQueued | fProcessing
	q.n--
	q.processing++
	var waited time.Duration
	if q.timed {
		s.startedAt = q.now()
		waited = time.Duration(s.startedAt - s.addedAt)
	}
	k = s.key
	q.mu.Unlock()
	if q.obs != nil {
		q.obs.Waited(waited)
	}
	return k, true, false
}

// Done ends the run of k that Get started; if k was added meanwhile, it is
// queued again. Done of a key that is not being processed does nothing.
func (q *Queue[K]) Done(k K) {
	q.mu.Lock()
	i, ok := q.index[k]
	if !ok || q.slots[i].flags&fProcessing == 0 {
		q.mu.Unlock()
		return
	}
	s := &q.slots[i]
	dirty, low := s.flags&fDirty != 0, s.flags&fLow != 0
	s.flags &^= fProcessing | fDirty | fLow
	q.processing--
	var now int64
	if q.timed || dirty && (low || q.low.n > 0) {
		now = q.now()
	}
	worked, added := time.Duration(now-s.startedAt), false
	switch {
	case q.shutdown:
		if q.processing == 0 && q.drained != nil {
			close(q.drained)
			q.drained = nil
		}
	case dirty:
		added = q.readyLocked(i, low, now)
	case q.minInterval > 0 && now < s.startedAt+q.minInterval: // keep startedAt to pace the next add
		q.waitLocked(i, s.startedAt+q.minInterval, false, now)
	}
	if s.flags == fUsed {
		q.freeLocked(i)
	}
	q.mu.Unlock()
	if q.obs != nil {
		q.obs.Worked(worked)
		if added {
			q.obs.Added()
		}
	}
}

// Len is the number of queued keys (not waiting, not processing). Use it for
// metrics only: it may be stale by the time it returns.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// InFlight reports the keys being processed, the total time they have been
// processed so far and the longest of those times. Durations are 0 unless the
// queue has an Observer or MinInterval.
func (q *Queue[K]) InFlight() (n int, unfinished, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.timed || q.processing == 0 {
		return q.processing, 0, 0
	}
	now := q.now()
	for i := range q.slots {
		if s := &q.slots[i]; s.flags&fProcessing != 0 {
			d := time.Duration(now - s.startedAt)
			unfinished += d
			longest = max(longest, d)
		}
	}
	return q.processing, unfinished, longest
}

// ShutDown stops the queue: every Get returns shutdown=true from now on,
// queued and waiting keys are dropped, and adds do nothing. Keys being
// processed are still Done normally. Calling it again does nothing.
func (q *Queue[K]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	q.shutdown = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.armed = false
	for i := range q.slots {
		if s := &q.slots[i]; s.flags != 0 {
			if s.flags &= fUsed | fProcessing; s.flags == fUsed {
				q.freeLocked(uint32(i))
			}
		}
	}
	q.normal, q.low, q.wait = ring[uint32]{}, ring[lowEntry]{}, nil
	q.n, q.stale = 0, 0
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown, then it waits until every key handed out
// is Done, or until ctx ends, returning an error that wraps ctx's cause.
func (q *Queue[K]) ShutDownWithDrain(ctx context.Context) error {
	q.ShutDown()
	q.mu.Lock()
	if q.processing == 0 {
		q.mu.Unlock()
		return nil
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	ch := q.drained
	q.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		n, _, _ := q.InFlight()
		return fmt.Errorf("kctl: queue drain stopped with %d keys still in flight (is a worker stuck or missing a Done?): %w", n, context.Cause(ctx))
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

func (q *Queue[K]) allocLocked(k K) uint32 {
	var i uint32
	if n := len(q.free); n > 0 {
		i, q.free = q.free[n-1], q.free[:n-1]
	} else {
		i = uint32(len(q.slots))
		q.slots = append(q.slots, slot[K]{})
	}
	q.slots[i] = slot[K]{key: k, flags: fUsed, startedAt: neverStarted}
	q.index[k] = i
	return i
}

func (q *Queue[K]) freeLocked(i uint32) {
	delete(q.index, q.slots[i].key)
	q.slots[i] = slot[K]{}
	q.free = append(q.free, i)
}

// readyLocked is the one place a key becomes ready: a processing key is
// marked dirty, a queued low key is raised by a normal add, a key whose
// MinInterval has not passed waits for it, any other key is queued. It
// reports whether the key was queued.
func (q *Queue[K]) readyLocked(i uint32, low bool, now int64) bool {
	s := &q.slots[i]
	switch {
	case s.flags&fProcessing != 0:
		if s.flags&fDirty == 0 && low {
			s.flags |= fLow
		} else if !low {
			s.flags &^= fLow
		}
		s.flags |= fDirty
		return false
	case s.flags&fQueued != 0:
		if low || s.flags&fLow == 0 {
			return false
		}
		if q.promoteLocked(now); s.flags&fLow != 0 { // not aged yet: raise; its low entry dies
			s.flags &^= fLow
			q.normal.push(i)
		}
		return false
	case q.minInterval > 0 && now < s.startedAt+q.minInterval:
		q.waitLocked(i, s.startedAt+q.minInterval, true, now)
		return false
	}
	if low {
		q.seq++
		s.lowSeq = q.seq
		q.low.push(lowEntry{q.seq, i})
		s.flags |= fQueued | fLow
	} else {
		if q.low.n > 0 {
			q.promoteLocked(now) // aged low keys go first
		}
		q.normal.push(i)
		s.flags |= fQueued
	}
	s.addedAt = now
	q.n++
	q.cond.Signal()
	return true
}

func (q *Queue[K]) liveLow(e lowEntry) bool {
	s := &q.slots[e.idx]
	return s.flags&(fQueued|fLow) == fQueued|fLow && s.lowSeq == e.seq
}

// promoteLocked moves low keys queued for q.age or longer to the back of the
// normal line, oldest first, and drops dead low entries on the way.
func (q *Queue[K]) promoteLocked(now int64) {
	for q.low.n > 0 {
		if e := q.low.peek(); q.liveLow(e) {
			if now-q.slots[e.idx].addedAt < q.age {
				return
			}
			q.slots[e.idx].flags &^= fLow
			q.normal.push(e.idx)
		}
		q.low.pop()
	}
}

// popLocked removes the next key from its line; q.n must be > 0.
func (q *Queue[K]) popLocked() uint32 {
	if q.low.n > 0 && q.normal.n > 0 {
		q.promoteLocked(q.now())
	}
	if q.normal.n > 0 {
		return q.normal.pop()
	}
	for {
		if e := q.low.pop(); q.liveLow(e) {
			q.slots[e.idx].flags &^= fLow
			return e.idx
		}
	}
}

// waitLocked puts slot i in the heap, due at at. With add the key is made
// ready then, and an earlier add entry wins; without, the entry only keeps
// the slot alive (MinInterval).
func (q *Queue[K]) waitLocked(i uint32, at int64, add bool, now int64) {
	s := &q.slots[i]
	if s.flags&fWaiting != 0 {
		if s.flags&fWaitAdd != 0 && (!add || at >= s.waitAt) {
			return
		}
		q.stale++ // the old entry dies
	}
	q.seq++
	s.flags |= fWaiting
	if add {
		s.flags |= fWaitAdd
	}
	s.waitSeq, s.waitAt = q.seq, at
	q.wait = append(q.wait, waitEntry{at, q.seq, i})
	q.up(len(q.wait) - 1)
	if q.stale > 64 && q.stale > len(q.wait)/2 {
		q.compactLocked()
	}
	if !q.armed || at < q.armedAt {
		q.armed, q.armedAt = true, at
		if d := time.Duration(at - now); q.timer == nil {
			q.timer = time.AfterFunc(d, q.fire)
		} else {
			q.timer.Reset(d)
		}
	}
}

// fire runs on the timer: it makes due keys ready, in (at, seq) order, and
// re-arms the timer for the next one. A spurious call is harmless.
func (q *Queue[K]) fire() {
	q.mu.Lock()
	q.armed = false
	now, added := q.now(), 0
	for len(q.wait) > 0 && q.wait[0].at <= now {
		e := q.wait[0]
		q.popWaitLocked()
		s := &q.slots[e.idx]
		if s.flags&fWaiting == 0 || s.waitSeq != e.seq {
			q.stale--
			continue
		}
		add := s.flags&fWaitAdd != 0
		s.flags &^= fWaiting | fWaitAdd
		if add && q.readyLocked(e.idx, false, now) {
			added++
		}
		if s.flags == fUsed {
			q.freeLocked(e.idx)
		}
	}
	if len(q.wait) > 0 && (!q.armed || q.wait[0].at < q.armedAt) {
		q.armed, q.armedAt = true, q.wait[0].at
		q.timer.Reset(time.Duration(q.wait[0].at - now))
	}
	q.mu.Unlock()
	for ; added > 0 && q.obs != nil; added-- {
		q.obs.Added()
	}
}

func (q *Queue[K]) less(a, b int) bool {
	x, y := &q.wait[a], &q.wait[b]
	return x.at < y.at || x.at == y.at && x.seq < y.seq
}

func (q *Queue[K]) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !q.less(j, p) {
			return
		}
		q.wait[j], q.wait[p] = q.wait[p], q.wait[j]
		j = p
	}
}

func (q *Queue[K]) down(j int) {
	for n := len(q.wait); ; {
		c := 2*j + 1
		if c >= n {
			return
		}
		if c+1 < n && q.less(c+1, c) {
			c++
		}
		if !q.less(c, j) {
			return
		}
		q.wait[j], q.wait[c] = q.wait[c], q.wait[j]
		j = c
	}
}

func (q *Queue[K]) popWaitLocked() {
	n := len(q.wait) - 1
	q.wait[0] = q.wait[n]
	q.wait = q.wait[:n]
	q.down(0)
}

// compactLocked drops dead entries from the heap and re-heapifies it.
func (q *Queue[K]) compactLocked() {
	live := q.wait[:0]
	for _, e := range q.wait {
		if s := &q.slots[e.idx]; s.flags&fWaiting != 0 && s.waitSeq == e.seq {
			live = append(live, e)
		}
	}
	q.wait, q.stale = live, 0
	for j := len(live)/2 - 1; j >= 0; j-- {
		q.down(j)
	}
}

// ring is a FIFO on a circular buffer whose length is a power of two.
type ring[E any] struct {
	buf     []E
	head, n int
}

func (r *ring[E]) push(e E) {
	if r.n == len(r.buf) {
		buf := make([]E, max(16, 2*len(r.buf)))
		copy(buf[copy(buf, r.buf[r.head:]):], r.buf[:r.head])
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
}

func (r *ring[E]) peek() E { return r.buf[r.head] }

func (r *ring[E]) pop() E {
	e := r.buf[r.head]
	var zero E
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return e
}

// RateLimiter decides how long AddRateLimited waits before adding a key.
// Implementations must be goroutine-safe; the queue calls them outside its lock.
type RateLimiter[K comparable] interface {
	When(k K) time.Duration // counts one more failure of k and returns its delay
	Forget(k K)             // resets k's failure count
	NumRequeues(k K) int    // k's failure count
}

// DefaultRateLimiter is client-go's and controller-runtime's default: the
// larger of a per-key exponential backoff from 5ms doubling up to 1000s and
// an overall token bucket of 10 per second with a burst of 100.
func DefaultRateLimiter[K comparable]() RateLimiter[K] {
	return MaxOfLimiters(NewBackoffLimiter[K](5*time.Millisecond, 1000*time.Second), NewBucketLimiter[K](10, 100))
}

// NewBackoffLimiter delays a key base * 2^failures, at most max, where
// failures counts the key's When calls since its last Forget.
func NewBackoffLimiter[K comparable](base, max time.Duration) RateLimiter[K] {
	return &backoffLimiter[K]{failures: map[K]int{}, base: base, max: max}
}

type backoffLimiter[K comparable] struct {
	mu        sync.Mutex
	failures  map[K]int // keys with at least one failure since Forget
	base, max time.Duration
}

func (l *backoffLimiter[K]) When(k K) time.Duration {
	l.mu.Lock()
	n := l.failures[k]
	l.failures[k] = n + 1
	l.mu.Unlock()
	return backoff(l.base, l.max, n)
}

func (l *backoffLimiter[K]) Forget(k K) {
	l.mu.Lock()
	delete(l.failures, k)
	l.mu.Unlock()
}

func (l *backoffLimiter[K]) NumRequeues(k K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[k]
}

// backoff is base * 2^n capped at max, without overflow.
func backoff(base, max time.Duration, n int) time.Duration {
	if n >= 63 || base > max>>n {
		return max
	}
	return base << n
}

// NewBucketLimiter is a token bucket shared by all keys: burst tokens, refilled
// at qps per second, one taken per When; When returns how long until the
// token it took is there. It counts no failures. qps <= 0 means no limit.
func NewBucketLimiter[K comparable](qps float64, burst int) RateLimiter[K] {
	return &bucketLimiter[K]{qps: qps, burst: float64(burst), tokens: float64(burst)}
}

type bucketLimiter[K comparable] struct {
	mu         sync.Mutex
	qps, burst float64
	tokens     float64   // may go negative: tokens promised to waiting keys
	last       time.Time // when tokens was last refilled; zero before the first When
}

func (l *bucketLimiter[K]) When(K) time.Duration {
	if l.qps <= 0 {
		return 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.qps)
	}
	l.last = now
	l.tokens--
	if l.tokens >= 0 {
		return 0
	}
	return time.Duration(-l.tokens / l.qps * float64(time.Second))
}

func (l *bucketLimiter[K]) Forget(K)          {}
func (l *bucketLimiter[K]) NumRequeues(K) int { return 0 }

// MaxOfLimiters waits the longest delay of all limiters (each When is called)
// and reports the highest NumRequeues.
func MaxOfLimiters[K comparable](limiters ...RateLimiter[K]) RateLimiter[K] {
	return maxLimiter[K](limiters)
}

type maxLimiter[K comparable] []RateLimiter[K]

func (m maxLimiter[K]) When(k K) (d time.Duration) {
	for _, l := range m {
		d = max(d, l.When(k))
	}
	return d
}

func (m maxLimiter[K]) Forget(k K) {
	for _, l := range m {
		l.Forget(k)
	}
}

func (m maxLimiter[K]) NumRequeues(k K) (n int) {
	for _, l := range m {
		n = max(n, l.NumRequeues(k))
	}
	return n
}

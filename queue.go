package kctl

import (
	"cmp"
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
//     Keys due at the same time become ready in the order they were scheduled.
//   - Priority: AddLowPriority keys are handed out after normal ones, in their
//     own FIFO order. A low key queued for AgeLowPriorityAfter joins the back
//     of the normal line, so none starves. Add of a queued low key raises it.
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

	normal fifo[uint32] // queued normal keys, FIFO; every item is a queued slot without fLow
	low    fifo[item]   // queued low keys, FIFO; an item is live iff its slot has fQueued|fLow and its seq
	n      int          // queued keys: normal.len() + live entries in low
	wait   []item       // min-heap on (at, seq) of exactly the slots with fWaiting; slots[wait[j].idx].pos == j
	seq    uint64       // last seq given to a low or wait item

	timer      *time.Timer // the one AfterFunc timer serving wait
	armed      bool        // timer fires at armedAt, and armedAt <= wait[0].at
	armedAt    int64
	processing int           // slots with fProcessing
	shutdown   bool          // set once; then n == 0, wait is empty, no slot is queued, dirty or waiting
	drained    chan struct{} // made at shutdown, closed once processing is 0

	epoch                      time.Time // origin of the int64 times: ns, monotonic
	last                       int64     // the last time read, under mu
	timed                      bool      // Get and Done read the clock (Observer or MinInterval)
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
	fWaitAdd                      // with fWaiting: made ready when due; else the item only keeps startedAt until MinInterval passed
)

type slot[K comparable] struct {
	key       K
	flags     uint8
	pos       int32  // fWaiting: index in wait
	seq       uint64 // fQueued|fLow: seq of the live item in low
	addedAt   int64  // fQueued: when it was queued (set when timed or low)
	startedAt int64  // when Get last handed it out (set when timed; long ago for a new slot)
}

// item is an element of low (at unused) or wait.
type item struct {
	at  int64 // due time
	seq uint64
	idx uint32
}

// QueueOptions configures NewQueue. The zero value gives client-go's
// behaviour: DefaultRateLimiter, no pacing, no observer.
type QueueOptions[K comparable] struct {
	// RateLimiter sets AddRateLimited's delays. Defaults to DefaultRateLimiter.
	RateLimiter RateLimiter[K]
	// Debounce, when > 0, makes Add of a key that is not queued schedule it
	// Debounce later (as AddAfter does), so a burst of adds is one run. Add
	// of a queued key and AddLowPriority are not delayed. Defaults to 0.
	Debounce time.Duration
	// MinInterval, when > 0, is the least time between the starts (Gets) of
	// two runs of a key: an add arriving sooner waits until then. Defaults to 0.
	MinInterval time.Duration
	// Observer receives metrics events. Defaults to none; then Add (without
	// delay or low priority), Get and Done never read the clock.
	Observer QueueObserver
	// AgeLowPriorityAfter is how long a low-priority key waits before it joins
	// the back of the normal line. Defaults to a minute: live events go ahead
	// of a restart's backlog for that long, and no longer.
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
		rl:    cmp.Or(opts.RateLimiter, DefaultRateLimiter[K]()),
		timed: opts.Observer != nil || opts.MinInterval > 0, debounce: int64(max(opts.Debounce, 0)),
		minInterval: int64(max(opts.MinInterval, 0)), age: int64(cmp.Or(max(opts.AgeLowPriorityAfter, 0), time.Minute))}
	q.cond.L = &q.mu
	return q
}

func (q *Queue[K]) now() int64 { q.last = int64(time.Since(q.epoch)); return q.last }

// Add marks k as needing work. It does nothing after ShutDown.
func (q *Queue[K]) Add(k K) { q.add(k, 0, false) }

// AddLowPriority is Add for keys from an informer's initial list: they are
// handed out after normal keys until they age (see Queue).
func (q *Queue[K]) AddLowPriority(k K) { q.add(k, 0, true) }

// AddAfter adds k once d has passed (d <= 0: Add). A waiting key moves earlier,
// never later, and is added when due even if it was queued or run meanwhile.
func (q *Queue[K]) AddAfter(k K, d time.Duration) { q.add(k, d, false) }

func (q *Queue[K]) add(k K, d time.Duration, low bool) {
	q.mu.Lock()
	i, ok := q.index[k]
	if q.shutdown || ok && q.dupLocked(&q.slots[i], d, low) {
		q.mu.Unlock()
		return
	}
	if !ok {
		i = q.allocLocked(k)
	}
	if d <= 0 && !low && q.slots[i].flags&fQueued == 0 {
		d = time.Duration(q.debounce)
	}
	var now int64
	if q.timed || d > 0 || low || q.low.len() > 0 {
		now = q.now()
	}
	added := 0
	if d > 0 { // wait until now+d (saturated); spare the timer the keys already due
		q.waitLocked(i, min(now, math.MaxInt64-int64(d))+int64(d), true, now)
		added = q.dueLocked(now)
	} else if q.readyLocked(i, low, now) {
		added = 1
	}
	q.mu.Unlock()
	for ; added > 0 && q.obs != nil; added-- {
		q.obs.Added()
	}
}

// dupLocked reports whether adding s changes nothing: it is queued at the same
// or a higher priority, or waiting to be added by q.last+d <= now+d.
func (q *Queue[K]) dupLocked(s *slot[K], d time.Duration, low bool) bool {
	if d <= 0 {
		return s.flags&fQueued != 0 && (low || s.flags&fLow == 0)
	}
	return s.flags&fWaitAdd != 0 && q.wait[s.pos].at <= q.last+int64(d)
}

// AddRateLimited adds k after the rate limiter's delay for it, counting one
// more failure of k. Call it when work on k failed; call Forget when it worked.
func (q *Queue[K]) AddRateLimited(k K) {
	d := q.rl.When(k)
	if q.obs != nil {
		q.obs.Retried()
	}
	q.AddAfter(k, d)
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
	i := q.popLocked()
	s := &q.slots[i]
	s.flags = s.flags&^fQueued | fProcessing
	q.n, q.processing = q.n-1, q.processing+1
	if q.timed {
		s.startedAt = q.now()
	}
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
	if q.timed || dirty && (low || q.low.len() > 0) {
		now = q.now()
	}
	worked, added := time.Duration(now-s.startedAt), false
	switch {
	case q.shutdown:
		if q.processing == 0 {
			close(q.drained)
		}
	case dirty:
		added = q.readyLocked(i, low, now)
	case now < s.startedAt+q.minInterval: // keep startedAt to pace the next add
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

// Len is the number of queued keys (not waiting, not processing), for metrics.
func (q *Queue[K]) Len() int { q.mu.Lock(); defer q.mu.Unlock(); return q.n }

// InFlight reports the keys being processed, for how long in total and the
// longest. Durations are 0 unless the queue has an Observer or MinInterval.
func (q *Queue[K]) InFlight() (n int, unfinished, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, now := 0, q.now(); i < len(q.slots) && q.timed; i++ {
		if s := &q.slots[i]; s.flags&fProcessing != 0 {
			unfinished, longest = unfinished+time.Duration(now-s.startedAt), max(longest, time.Duration(now-s.startedAt))
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
	q.shutdown, q.armed, q.drained = true, false, make(chan struct{})
	if q.processing == 0 {
		close(q.drained)
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	for i := range q.slots { // keep only processing keys
		if s := &q.slots[i]; s.flags&fProcessing == 0 && s.flags != 0 {
			q.freeLocked(uint32(i))
		} else {
			s.flags &= fUsed | fProcessing
		}
	}
	q.normal, q.low, q.wait, q.n = fifo[uint32]{}, fifo[item]{}, nil, 0
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
		return fmt.Errorf("kctl: queue drain stopped with %d keys still in flight (is a worker stuck or missing a Done?): %w", n, context.Cause(ctx))
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[K]) ShuttingDown() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.shutdown }

func (q *Queue[K]) allocLocked(k K) uint32 {
	i := uint32(len(q.slots))
	if n := len(q.free); n > 0 {
		i, q.free = q.free[n-1], q.free[:n-1]
	} else {
		q.slots = append(q.slots, slot[K]{})
	}
	q.slots[i] = slot[K]{key: k, flags: fUsed, startedAt: math.MinInt64 / 2}
	q.index[k] = i
	return i
}

func (q *Queue[K]) freeLocked(i uint32) {
	delete(q.index, q.slots[i].key)
	q.slots[i] = slot[K]{}
	q.free = append(q.free, i)
}

// readyLocked is where every add ends up: a processing key is marked dirty, a
// queued low key is raised by a normal add, a key within MinInterval of its
// last start waits, any other key is queued. It reports the last case.
func (q *Queue[K]) readyLocked(i uint32, low bool, now int64) bool {
	s := &q.slots[i]
	switch {
	case s.flags&fProcessing != 0: // low at Done only if every add meanwhile was low
		keepLow := low && s.flags&(fDirty|fLow) != fDirty
		if s.flags = s.flags&^fLow | fDirty; keepLow {
			s.flags |= fLow
		}
		return false
	case s.flags&fQueued != 0:
		if !low && s.flags&fLow != 0 {
			if q.promoteLocked(now); s.flags&fLow != 0 { // not aged: raise; its low item dies
				s.flags &^= fLow
				q.normal.push(i)
			}
		}
		return false
	case now < s.startedAt+q.minInterval:
		q.waitLocked(i, s.startedAt+q.minInterval, true, now)
		return false
	}
	if low {
		q.seq++
		s.seq, s.flags = q.seq, s.flags|fQueued|fLow
		q.low.push(item{seq: q.seq, idx: i})
	} else {
		q.promoteLocked(now) // aged low keys go first
		q.normal.push(i)
		s.flags |= fQueued
	}
	s.addedAt = now
	q.n++
	q.cond.Signal()
	return true
}

func (q *Queue[K]) liveLow(e item) bool {
	s := &q.slots[e.idx]
	return s.flags&(fQueued|fLow) == fQueued|fLow && s.seq == e.seq
}

// promoteLocked moves low keys queued for q.age or longer to the back of the
// normal line, oldest first, dropping dead low entries on the way.
func (q *Queue[K]) promoteLocked(now int64) {
	for ; q.low.len() > 0; q.low.pop() {
		if e := q.low.buf[q.low.head]; q.liveLow(e) {
			if now-q.slots[e.idx].addedAt < q.age {
				return
			}
			q.slots[e.idx].flags &^= fLow
			q.normal.push(e.idx)
		}
	}
}

// popLocked takes the next key out of its line; q.n must be > 0.
func (q *Queue[K]) popLocked() uint32 {
	if q.low.len() > 0 && q.normal.len() > 0 {
		q.promoteLocked(q.now())
	}
	if q.normal.len() > 0 {
		return q.normal.pop()
	}
	for {
		if e := q.low.pop(); q.liveLow(e) {
			q.slots[e.idx].flags &^= fLow
			return e.idx
		}
	}
}

// waitLocked puts slot i in the heap, due at at: with add, to be made ready
// (an earlier add wins); without, only to keep the slot (MinInterval).
func (q *Queue[K]) waitLocked(i uint32, at int64, add bool, now int64) {
	s := &q.slots[i]
	if s.flags&fWaiting == 0 {
		s.pos = int32(len(q.wait))
		q.wait = append(q.wait, item{idx: i})
	} else if s.flags&fWaitAdd != 0 && (!add || at >= q.wait[s.pos].at) {
		return
	}
	q.seq++
	q.wait[s.pos].at, q.wait[s.pos].seq = at, q.seq
	if s.flags |= fWaiting; add {
		s.flags |= fWaitAdd
	}
	q.siftLocked(int(s.pos))
	q.armLocked(now)
}

// armLocked makes the timer fire when wait[0] is due.
func (q *Queue[K]) armLocked(now int64) {
	if len(q.wait) == 0 || q.armed && q.armedAt <= q.wait[0].at {
		return
	}
	q.armed, q.armedAt = true, q.wait[0].at
	if d := time.Duration(q.armedAt - now); q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
	} else {
		q.timer.Reset(d)
	}
}

// fire runs on the timer. A spurious call is harmless.
func (q *Queue[K]) fire() {
	q.mu.Lock()
	q.armed = false
	added := q.dueLocked(q.now())
	q.mu.Unlock()
	for ; added > 0 && q.obs != nil; added-- {
		q.obs.Added()
	}
}

// dueLocked makes the keys due by now ready, in (at, seq) order, re-arms
// the timer for the next one and reports how many keys it queued.
func (q *Queue[K]) dueLocked(now int64) (added int) {
	for len(q.wait) > 0 && q.wait[0].at <= now {
		i, last := q.wait[0].idx, len(q.wait)-1
		if q.wait[0], q.wait = q.wait[last], q.wait[:last]; last > 0 {
			q.siftLocked(0)
		}
		s := &q.slots[i]
		add := s.flags&fWaitAdd != 0
		if s.flags &^= fWaiting | fWaitAdd; add && q.readyLocked(i, false, now) {
			added++
		}
		if s.flags == fUsed {
			q.freeLocked(i)
		}
	}
	q.armLocked(now)
	return added
}

// siftLocked moves wait[j] up or down to its place in the heap, which is
// 4-ary to keep it shallow, updating the pos of every item it moves.
func (q *Queue[K]) siftLocked(j int) {
	w, e := q.wait, q.wait[j]
	for ; j > 0 && e.before(&w[(j-1)/4]); j = (j - 1) / 4 {
		w[j] = w[(j-1)/4]
		q.slots[w[j].idx].pos = int32(j)
	}
	for c := 4*j + 1; c < len(w); c = 4*j + 1 {
		m := c
		for x := c + 1; x < min(c+4, len(w)); x++ {
			if w[x].before(&w[m]) {
				m = x
			}
		}
		if !w[m].before(&e) {
			break
		}
		w[j] = w[m]
		q.slots[w[j].idx].pos = int32(j)
		j = m
	}
	w[j] = e
	q.slots[e.idx].pos = int32(j)
}

func (e *item) before(f *item) bool { return e.at < f.at || e.at == f.at && e.seq < f.seq }

// fifo is a queue on a slice. Popped slots are zeroed; a push shifts the
// rest down once half of the slice is popped, so both stay O(1) amortized.
type fifo[E any] struct {
	buf  []E
	head int
}

func (f *fifo[E]) len() int { return len(f.buf) - f.head }

func (f *fifo[E]) push(e E) {
	if f.head > 0 && f.head >= len(f.buf)/2 {
		f.buf, f.head = f.buf[:copy(f.buf, f.buf[f.head:])], 0
	}
	f.buf = append(f.buf, e)
}

func (f *fifo[E]) pop() (e E) {
	e, f.buf[f.head] = f.buf[f.head], e
	f.head++
	return e
}

// RateLimiter decides how long AddRateLimited waits before adding a key.
// Implementations must be goroutine-safe; the queue calls them outside its lock.
type RateLimiter[K comparable] interface {
	When(k K) time.Duration // counts one more failure of k and returns its delay
	Forget(k K)             // resets k's failure count
	NumRequeues(k K) int    // k's failure count
}

// DefaultRateLimiter is client-go's and controller-runtime's default:
// NewRateLimiter(5*time.Millisecond, 1000*time.Second, 10, 100).
func DefaultRateLimiter[K comparable]() RateLimiter[K] {
	return NewRateLimiter[K](5*time.Millisecond, 1000*time.Second, 10, 100)
}

// NewRateLimiter delays a key by the larger of two limits:
//   - its exponential backoff, base * 2^failures capped at max, where
//     failures counts its When calls since its last Forget (base 0: none);
//   - a token bucket shared by all keys, holding burst tokens refilled at
//     qps per second: When takes a token and waits for it (qps <= 0: none).
func NewRateLimiter[K comparable](base, max time.Duration, qps float64, burst int) RateLimiter[K] {
	return &rateLimiter[K]{failures: map[K]int{}, base: base, max: max, qps: qps, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

type rateLimiter[K comparable] struct {
	mu         sync.Mutex
	failures   map[K]int // keys that failed since their Forget
	base, max  time.Duration
	qps, burst float64
	tokens     float64   // may go negative: tokens promised to waiting keys
	last       time.Time // when tokens was last refilled
}

func (l *rateLimiter[K]) When(k K) time.Duration {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[k]++
	d := backoff(l.base, l.max, l.failures[k]-1)
	if l.qps > 0 {
		l.tokens, l.last = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.qps)-1, now
		d = max(d, time.Duration(-l.tokens/l.qps*float64(time.Second))) // <= 0 while tokens last
	}
	return d
}

func (l *rateLimiter[K]) Forget(k K)          { l.mu.Lock(); defer l.mu.Unlock(); delete(l.failures, k) }
func (l *rateLimiter[K]) NumRequeues(k K) int { l.mu.Lock(); defer l.mu.Unlock(); return l.failures[k] }

// backoff is base * 2^n capped at max, without overflow.
func backoff(base, max time.Duration, n int) time.Duration {
	if n >= 63 || base > max>>n {
		return max
	}
	return base << n
}

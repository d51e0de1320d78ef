// Package keyqueue holds the keys of kctl's Queue and the rules that
// move a key from one state to another: queued (in a line,
// internal/keyline), processing (handed out, not yet Done), dirty (added
// while processing, queued again at Done) and waiting (internal/keywait);
// with the Queue's priorities and pacing. Keys only decides: it is not
// goroutine-safe. The Queue holds its lock around every call, blocks its
// Gets and tells its observer, as golang-lru's Cache locks around the
// plain simplelru, so that the rules can be tested without goroutines.
package keyqueue

import (
	"cmp"
	"fmt"
	"time"

	"github.com/kctl-dev/kctl/internal/keyline"
	"github.com/kctl-dev/kctl/internal/keywait"
)

// Options are what a Queue's QueueOptions say of when its keys are
// queued. Debounce and MinInterval are off at 0 (or less); Age defaults
// to a minute (at 0 or less).
type Options struct {
	// Debounce delays a normal add of a key that is not queued, so that
	// a burst of adds is one run.
	Debounce time.Duration
	// MinInterval is the least time between the starts of a key.
	MinInterval time.Duration
	// Age is how long a low key waits before it joins the back of the
	// normal line.
	Age time.Duration
}

// Keys is the state of a Queue's keys. Make it with New.
type Keys[K comparable] struct {
	// queued holds every key that waits in line to be handed out, with
	// when it was queued: Pop reports the wait since then, and a low key
	// ages from then. A queued key is not in processing.
	queued map[K]time.Time
	// line is the order the queued keys are handed out in: a FIFO until
	// the first low add makes it a Priority line. It holds each queued
	// key once, and knows which are low (not raised).
	line keyline.Line[K]
	// processing holds every key handed out by Pop and not yet Done,
	// with when Pop handed it out.
	processing map[K]time.Time
	// heldLow holds the processing keys Pop took at low priority: an
	// add after a delay of one while it is processing (a requeue) waits
	// to be queued at low priority again. Every key in heldLow is in
	// processing.
	heldLow map[K]bool
	// dirty holds the keys added while processing, to be queued again at
	// Done; true if every add since Pop was low. Every key in dirty is in
	// processing.
	dirty map[K]bool

	// waiting holds the keys that wait for a time; its timer calls the
	// Queue, which calls Due. A key may wait to be added while it is
	// queued or processing; a key held (a wait without add) is neither.
	// After Done, a key's wait keeps its MinInterval's end (NotBefore);
	// while it is processing, processing holds its start.
	waiting keywait.Waits[K]

	// closed is set once, by Close. Then queued, dirty and waiting are
	// empty and stay so.
	closed bool
	// drained is closed once closed is set and no key is processing
	// (by Close or by the last Done after it).
	drained chan struct{}
	// stopDrain is closed by a Shut while a Drain's wait goes on, to
	// end the wait; nil when none waits.
	stopDrain chan struct{}

	opts Options
}

// New returns an empty Keys, with opts defaulted. fire is what the waits' timer calls, with
// no lock held: it takes the Queue's lock and calls Due.
func New[K comparable](opts Options, fire func()) *Keys[K] {
	s := &Keys[K]{
		queued:     map[K]time.Time{},
		line:       &keyline.FIFO[K]{},
		processing: map[K]time.Time{},
		heldLow:    map[K]bool{},
		dirty:      map[K]bool{},
		drained:    make(chan struct{}),
		opts:       opts,
	}
	s.opts.Debounce = max(opts.Debounce, 0)
	s.opts.MinInterval = max(opts.MinInterval, 0)
	s.opts.Age = cmp.Or(max(opts.Age, 0), time.Minute)
	s.waiting.Fire = fire
	return s
}

// Add is a Queue's Add (d <= 0), AddLowPriority (low) and AddAfter (d >
// 0) at now. It returns 1 if it queued k, else 0; once closed, it does
// nothing.
func (s *Keys[K]) Add(k K, d time.Duration, low bool, now time.Time) int {
	if s.closed {
		return 0
	}
	f, ok := s.line.(*keyline.FIFO[K])
	if low && ok { // the first: its keys keep their order, at normal priority
		s.line = keyline.NewPriority(f, s.opts.Age)
	}
	_, queued := s.queued[k]
	// Stingy: a low add of a queued key changes nothing. A normal one
	// may raise it (ready).
	if queued && d <= 0 && low {
		return 0
	}
	// A requeue keeps the priority Pop handed k out with.
	waitLow := s.heldLow[k]
	if d <= 0 && !low && !queued {
		d = s.opts.Debounce
		waitLow = false
	}
	if d > 0 {
		s.waiting.Set(k, now.Add(d), true, waitLow, now)
		return 0
	}
	w, _ := s.waiting.Get(k)
	return s.ready(k, low, w.NotBefore, now)
}

// ready is where every add ends up, and Done of a key added while
// processing, and a wait that ends. It returns 1 if it queued k, else
// 0. A processing key becomes dirty; a queued low key is raised by a
// normal add unless it aged; a key before notBefore (its MinInterval's
// end) waits; any other is queued, and if normal, stops waiting.
func (s *Keys[K]) ready(k K, low bool, notBefore, now time.Time) int {
	if _, ok := s.processing[k]; ok {
		s.markDirty(k, low)
		return 0
	}
	if since, ok := s.queued[k]; ok {
		if !low {
			s.line.Raise(k, since, now)
		}
		return 0
	}
	if now.Before(notBefore) {
		// The hold keeps notBefore on the wait to add.
		s.waiting.Set(k, notBefore, false, false, now)
		s.waiting.Set(k, notBefore, true, low, now)
		return 0
	}
	s.queued[k] = now
	s.line.Push(k, low, now)
	if !low { // queued now, which is earlier than the wait's end
		s.waiting.Remove(k)
	}
	return 1
}

// markDirty marks processing key k to be queued again at Done, low only
// if every add since Pop was low.
func (s *Keys[K]) markDirty(k K, low bool) {
	if !low {
		s.dirty[k] = false
		return
	}
	if _, ok := s.dirty[k]; !ok {
		s.dirty[k] = true
	}
}

// Pop hands out the next queued key at now: it is processing until
// Done. It returns when k was queued. Call it only when Len() > 0.
func (s *Keys[K]) Pop(now time.Time) (k K, since time.Time) {
	k, low := s.line.Pop()
	since = s.queued[k]
	if low {
		s.heldLow[k] = true
	}
	delete(s.queued, k)
	s.processing[k] = now
	return k, since
}

// Done ends at now the processing of k that Pop started, at start; if
// k is not processing, ok is false. It returns 1 if k was added
// meanwhile and is queued again, else 0. If MinInterval has not passed
// since start, k is held (a wait without add) until it has, unless
// closed.
func (s *Keys[K]) Done(k K, now time.Time) (added int, start time.Time, ok bool) {
	start, ok = s.processing[k]
	if !ok {
		return 0, start, false
	}
	delete(s.processing, k)
	delete(s.heldLow, k)
	low, dirty := s.dirty[k]
	delete(s.dirty, k)
	next := start.Add(s.opts.MinInterval)
	if dirty {
		added = s.ready(k, low, next, now)
	} else if !s.closed && now.Before(next) {
		// A hold: it keeps k's MinInterval end for the next add.
		s.waiting.Set(k, next, false, false, now)
	}
	if s.closed && len(s.processing) == 0 {
		close(s.drained)
	}
	return added, start, true
}

// Due ends the waits that are due at now, in order, and returns the
// number of keys it queued. A call with none due is harmless.
func (s *Keys[K]) Due(now time.Time) int {
	added := 0
	for w := range s.waiting.Due(now) {
		if w.Add {
			added += s.ready(w.Key, w.Low, w.NotBefore, now)
		}
	}
	return added
}

// Close drops the queued, dirty and waiting keys; from then on, adds
// do nothing. Processing keys are still Done. A second Close does
// nothing.
func (s *Keys[K]) Close() {
	if s.closed {
		return
	}
	s.closed = true
	if len(s.processing) == 0 {
		close(s.drained)
	}
	clear(s.queued)
	s.line.Reset()
	clear(s.dirty)
	s.waiting.Reset()
}

// Shut is a Queue's ShutDown: Close, and the end of the wait of a
// Drain before it (its stop is closed).
func (s *Keys[K]) Shut() {
	s.Close()
	if s.stopDrain != nil {
		close(s.stopDrain)
		s.stopDrain = nil
	}
}

// Drain is a Queue's ShutDownWithDrain: Close, then the two ends of its
// wait: drained (Drained), and stop, closed by the next Shut.
func (s *Keys[K]) Drain() (drained, stop <-chan struct{}) {
	s.Close()
	if s.stopDrain == nil {
		s.stopDrain = make(chan struct{})
	}
	return s.drained, s.stopDrain
}

// Closed reports whether Close was called.
func (s *Keys[K]) Closed() bool {
	return s.closed
}

// Drained is closed once Close was called and no key is processing: a
// drain's end.
func (s *Keys[K]) Drained() <-chan struct{} {
	return s.drained
}

// Len is the number of queued keys (not waiting, not processing).
func (s *Keys[K]) Len() int {
	return len(s.queued)
}

// Processing is the number of processing keys.
func (s *Keys[K]) Processing() int {
	return len(s.processing)
}

// InFlight reports the processing keys, for how long in total at now
// and the longest.
func (s *Keys[K]) InFlight(now time.Time) (n int, unfinished, longest time.Duration) {
	for _, start := range s.processing {
		d := now.Sub(start)
		unfinished += d
		longest = max(longest, d)
	}
	return len(s.processing), unfinished, longest
}

// WaitingUntil reports when k's wait to be added ends, if k waits.
func (s *Keys[K]) WaitingUntil(k K) (time.Time, bool) {
	w, ok := s.waiting.Get(k)
	if !ok || !w.Add {
		return time.Time{}, false
	}
	return w.At, true
}

// Kept is the number of keys s keeps anything of: once all work is
// done and all delays passed, 0. For tests.
func (s *Keys[K]) Kept() int {
	return len(s.queued) + len(s.processing) + len(s.dirty) + s.waiting.Len()
}

// Check reports a broken invariant of those documented on Keys' fields,
// or nil: for tests.
func (s *Keys[K]) Check() error {
	for k := range s.queued {
		if _, ok := s.processing[k]; ok {
			return fmt.Errorf("%v is queued and processing", k)
		}
	}
	if err := s.checkLine(); err != nil {
		return err
	}
	for k := range s.dirty {
		if _, ok := s.processing[k]; !ok {
			return fmt.Errorf("%v is dirty but not processing", k)
		}
	}
	for k := range s.heldLow {
		if _, ok := s.processing[k]; !ok {
			return fmt.Errorf("%v is held low but not processing", k)
		}
	}
	if err := s.waiting.Check(); err != nil {
		return err
	}
	for e := range s.waiting.All() {
		_, queued := s.queued[e.Key]
		_, processing := s.processing[e.Key]
		if !e.Add && (queued || processing) {
			return fmt.Errorf("%v is held, but queued=%v processing=%v", e.Key, queued, processing)
		}
	}
	if s.closed && (len(s.queued) != 0 || len(s.dirty) != 0 || s.waiting.Len() != 0) {
		return fmt.Errorf("closed with %d queued, %d dirty and %d waiting", len(s.queued), len(s.dirty), s.waiting.Len())
	}
	drained := false
	select {
	case <-s.drained:
		drained = true
	default:
	}
	if want := s.closed && len(s.processing) == 0; drained != want {
		return fmt.Errorf("drained %v, want %v (closed %v, %d processing)", drained, want, s.closed, len(s.processing))
	}
	return nil
}

// checkLine reports a key in the line twice, or not queued, or a queued
// key not in the line.
func (s *Keys[K]) checkLine() error {
	normal, low := keyline.Keys(s.line)
	seen := map[K]bool{}
	for _, k := range append(normal, low...) {
		if seen[k] {
			return fmt.Errorf("%v is in the line twice", k)
		}
		seen[k] = true
		if _, ok := s.queued[k]; !ok {
			return fmt.Errorf("%v is in the line but not queued", k)
		}
	}
	if len(seen) != len(s.queued) {
		return fmt.Errorf("%d keys queued, but %d in the line", len(s.queued), len(seen))
	}
	return nil
}

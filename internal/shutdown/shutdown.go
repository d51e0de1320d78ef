// Package shutdown is the schedule of kctl's graceful shutdown (see
// kctl's Manager.Start and Options.ShutdownTimeout): when, after the
// Manager's context ends, each of its last steps is due, so that Start
// returns within ShutdownTimeout even when some work ignores its
// context. The Manager and its parts read their deadlines from it; one
// step it does itself, for each of kctl's controllers: Drain, how a
// controller's run ends (its in-flight reconciles drained until DrainBy,
// or cancelled at once when leadership is lost), and Busy, which names
// them for its log. It also has the Manager's texts of a shutdown: the
// logs of work abandoned (LogAbandoned, LogAbandonedTerm) and the error
// of an Add too late (AddTooLate).
package shutdown

import (
	"sync"
	"time"
)

// Schedule is the schedule of a Manager's graceful shutdown, so that
// Start returns within ShutdownTimeout (T) even when some work ignores
// its context. It is fixed by the first call of Begin, when Start's
// context has ended (t0), and keeps a reserve r = T/5 (at most 2 s) for
// what must happen last:
//
//	t0          runnables' contexts end; controllers stop taking keys, in-flight reconciles go on
//	DrainBy     t0+T-r    in-flight reconciles' contexts are cancelled
//	AbandonAt   t0+T-r/2  leader work still running is abandoned (named in the log); the lease is released
//	WritesBy    t0+T-r/4  the lease release and the Event writers stop; unwritten Events are counted as dropped
//	End         t0+T      Start returns, naming whatever still runs
//
// The zero value is not usable: set Timeout. Safe for concurrent use.
type Schedule struct {
	// Timeout is T, the whole shutdown's bound (kctl's ShutdownTimeout).
	Timeout time.Duration
	once    sync.Once
	// t0 is set once, by Begin.
	t0 time.Time
}

// Begin fixes the schedule at the first call (now) and returns t0.
func (s *Schedule) Begin() time.Time {
	s.once.Do(func() { s.t0 = time.Now() })
	return s.t0
}

func (s *Schedule) reserve() time.Duration {
	return min(s.Timeout/5, 2*time.Second)
}

// DrainBy is when in-flight reconciles' contexts are cancelled.
func (s *Schedule) DrainBy() time.Time {
	return s.Begin().Add(s.Timeout - s.reserve())
}

// AbandonAt is when leader work still running is abandoned.
func (s *Schedule) AbandonAt() time.Time {
	return s.Begin().Add(s.Timeout - s.reserve()/2)
}

// WritesBy is when the lease release and the Event writers stop.
func (s *Schedule) WritesBy() time.Time {
	return s.Begin().Add(s.Timeout - s.reserve()/4)
}

// End is when Start returns.
func (s *Schedule) End() time.Time {
	return s.Begin().Add(s.Timeout)
}

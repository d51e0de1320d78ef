package kctl

import (
	"sync"
	"time"
)

// shutdown is the schedule of a Manager's graceful shutdown, so that Start
// returns within ShutdownTimeout (T) even when some work ignores its context.
// It is fixed by the first call of begin, when Start's context has ended (t0),
// and keeps a reserve r = T/5 (at most 2 s) for what must happen last:
//
//	t0          runnables' contexts end; controllers stop taking keys, in-flight reconciles go on
//	drainBy     t0+T-r    in-flight reconciles' contexts are cancelled
//	abandonAt   t0+T-r/2  leader work still running is abandoned (named in the log); the lease is released
//	writesBy    t0+T-r/4  the lease release and the Event writers stop; unwritten Events are counted as dropped
//	end         t0+T      Start returns, naming whatever still runs
//
// The zero value is not usable: set timeout. Safe for concurrent use.
type shutdown struct {
	timeout time.Duration
	once    sync.Once
	t0      time.Time // set once, by begin
}

// begin fixes the schedule at the first call (now) and returns t0.
func (s *shutdown) begin() time.Time {
	s.once.Do(func() { s.t0 = time.Now() })
	return s.t0
}

func (s *shutdown) reserve() time.Duration { return min(s.timeout/5, 2*time.Second) }

func (s *shutdown) drainBy() time.Time   { return s.begin().Add(s.timeout - s.reserve()) }
func (s *shutdown) abandonAt() time.Time { return s.begin().Add(s.timeout - s.reserve()/2) }
func (s *shutdown) writesBy() time.Time  { return s.begin().Add(s.timeout - s.reserve()/4) }
func (s *shutdown) end() time.Time       { return s.begin().Add(s.timeout) }

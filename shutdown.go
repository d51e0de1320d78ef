package kctl

// How a Manager stops: the schedule of a graceful shutdown, and the
// context a program's main ends on a signal.

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// shutdownSchedule is the schedule of a Manager's graceful shutdown, so that
// Start returns within ShutdownTimeout (T) even when some work ignores its
// context. It is fixed by the first call of begin, when Start's context has
// ended (t0), and keeps a reserve r = T/5 (at most 2 s) for what must happen
// last:
//
//	t0          runnables' contexts end; controllers stop taking keys, in-flight reconciles go on
//	drainBy     t0+T-r    in-flight reconciles' contexts are cancelled
//	abandonAt   t0+T-r/2  leader work still running is abandoned (named in the log); the lease is released
//	writesBy    t0+T-r/4  the lease release and the Event writers stop; unwritten Events are counted as dropped
//	end         t0+T      Start returns, naming whatever still runs
//
// The zero value is not usable: set timeout. Safe for concurrent use.
type shutdownSchedule struct {
	timeout time.Duration
	once    sync.Once
	// t0 is set once, by begin.
	t0 time.Time
}

// begin fixes the schedule at the first call (now) and returns t0.
func (s *shutdownSchedule) begin() time.Time {
	s.once.Do(func() { s.t0 = time.Now() })
	return s.t0
}

func (s *shutdownSchedule) reserve() time.Duration {
	return min(s.timeout/5, 2*time.Second)
}

func (s *shutdownSchedule) drainBy() time.Time {
	return s.begin().Add(s.timeout - s.reserve())
}

func (s *shutdownSchedule) abandonAt() time.Time {
	return s.begin().Add(s.timeout - s.reserve()/2)
}

func (s *shutdownSchedule) writesBy() time.Time {
	return s.begin().Add(s.timeout - s.reserve()/4)
}

func (s *shutdownSchedule) end() time.Time {
	return s.begin().Add(s.timeout)
}

// SignalContext returns a context that ends on the first SIGINT or SIGTERM.
// A second signal exits the process at once with status 1: the one place kctl
// exits, because you asked for it by calling this.
func SignalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}

package kctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// group runs named goroutines. The first error is kept and cancels the
// Manager (a tiny errgroup); a wait may end at a deadline and then names what
// still runs. Goroutines may be added while another goroutine waits. The zero
// value is not usable: call newGroup. Safe for concurrent use.
type group struct {
	cancel context.CancelCauseFunc // called with every error but context.Canceled

	mu      sync.Mutex
	err     error          // the first error
	running map[*task]bool // the goroutines that have not returned
	ended   chan struct{}  // closed, and replaced, each time one returns
}

// task names a goroutine of a group, for the log when it is abandoned.
type task struct {
	name string
	busy func() string // what it is doing, e.g. the keys in flight; may be nil
}

func newGroup(cancel context.CancelCauseFunc) *group {
	return &group{cancel: cancel, running: map[*task]bool{}, ended: make(chan struct{})}
}

// spawn runs fn in a new goroutine.
func (g *group) spawn(t *task, fn func() error) {
	g.mu.Lock()
	g.running[t] = true
	g.mu.Unlock()
	go func() {
		err := fn()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		if err != nil {
			g.cancel(err) // before the goroutine counts as returned: a wait then sees the cause
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.err == nil {
			g.err = err
		}
		delete(g.running, t)
		close(g.ended)
		g.ended = make(chan struct{})
	}()
}

// run runs r.Run(ctx) in a new goroutine. An error it returns while ctx has
// not ended is the group's.
func (g *group) run(ctx context.Context, r Runnable) {
	g.spawn(&task{name: r.Name, busy: r.busy}, func() error {
		if err := r.Run(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("kctl: runnable %q failed: %w", r.Name, err)
		}
		return nil
	})
}

// wait returns nil once every goroutine has returned. After stop has ended it
// waits only until by() and then returns what still runs: each name, with
// what it is doing.
func (g *group) wait(stop context.Context, by func() time.Time) []string {
	var timeout <-chan time.Time
	stopped := stop.Done()
	for {
		g.mu.Lock()
		n, ended := len(g.running), g.ended
		g.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ended:
		case <-stopped:
			stopped = nil
			timer := time.NewTimer(time.Until(by()))
			defer timer.Stop()
			timeout = timer.C
		case <-timeout:
			return g.stillRunning()
		}
	}
}

// stillRunning names the goroutines that have not returned, sorted.
func (g *group) stillRunning() []string {
	g.mu.Lock()
	tasks := make([]*task, 0, len(g.running))
	for t := range g.running {
		tasks = append(tasks, t)
	}
	g.mu.Unlock()
	names := make([]string, 0, len(tasks))
	for _, t := range tasks { // busy takes its own locks: outside g.mu
		name := t.name
		if t.busy != nil {
			if doing := t.busy(); doing != "" {
				name += " (" + doing + ")"
			}
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// firstErr is the first error a goroutine returned.
func (g *group) firstErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

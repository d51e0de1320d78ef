// Package group runs named goroutines, as a kctl Manager runs its
// runnables: the first error is kept and cancels (a tiny errgroup), and a
// wait may end at a deadline and then names what still runs. Pending holds
// the tasks added before the Manager starts, and Terms its leader-only
// tasks, run again in each leadership term.
package group

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Group runs named goroutines. The first error is kept and cancels the
// Manager (a tiny errgroup); a wait may end at a deadline and then names what
// still runs. Goroutines may be added while another goroutine waits. The zero
// value is not usable: call New. Safe for concurrent use.
type Group struct {
	cancel context.CancelCauseFunc // called with every error but context.Canceled

	mu      sync.Mutex
	err     error          // the first error
	running map[*task]bool // the goroutines that have not returned
	ended   chan struct{}  // closed, and replaced, each time one returns
}

// task names a goroutine of a Group, for the log when it is abandoned.
type task struct {
	name string
	busy func() string // what it is doing, e.g. the keys in flight; may be nil
}

// New returns a Group whose first error cancel receives.
func New(cancel context.CancelCauseFunc) *Group {
	return &Group{cancel: cancel, running: map[*task]bool{}, ended: make(chan struct{})}
}

// Go runs fn in a new goroutine named name; busy, if not nil, says what
// it is doing when a Wait gives up on it.
func (g *Group) Go(name string, busy func() string, fn func() error) {
	t := &task{name: name, busy: busy}
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

// Wait returns nil once every goroutine has returned. After stop has ended it
// waits only until by() and then returns what still runs: each name, with
// what it is doing.
func (g *Group) Wait(stop context.Context, by func() time.Time) []string {
	var timeout <-chan time.Time
	stopped := stop.Done()
	for {
		g.mu.Lock()
		n := len(g.running)
		ended := g.ended
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
			return g.Running()
		}
	}
}

// Running names the goroutines that have not returned, sorted.
func (g *Group) Running() []string {
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

// Err is the first error a goroutine returned.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

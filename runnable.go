package kctl

// Runnable, the goroutine groups a Manager runs runnables in (group), and
// the two contexts a leadership term hands its runnables. Add and the
// terms themselves are the Manager's (manager.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// LoggerFrom returns the logger kctl put in ctx: in a reconcile the Manager's
// logger with controller, namespace, name and reconcileID; in a runnable the
// Manager's logger; else slog.Default().
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

type loggerKey struct{}

// Runnable is a long-running part of a program that the Manager starts and
// stops with everything else, e.g. an HTTP endpoint that enqueues keys.
type Runnable struct {
	Name string
	// NeedLeader makes the Manager run it only while this replica leads.
	NeedLeader bool
	// Run works until ctx ends, and must then return promptly: on shutdown
	// the Manager abandons it after ShutdownTimeout. A returned error (other
	// than ctx's) stops the whole Manager, and Start returns it.
	// LoggerFrom(ctx) is the Manager's logger.
	Run func(ctx context.Context) error

	busy func() string // what it is doing, for the log if it is abandoned; may be nil
	// runTerm, if set, is Run for a leader-only runnable that needs its
	// term's lease context too (a controller, to drain at shutdown).
	runTerm func(leaderCtx, leaseCtx context.Context) error
}

// A leadership term hands its leader-only runnables two contexts.
// leaderCtx ends when the term ends: the Manager shuts down, or the lease
// is lost. leaseCtx ends only when the lease is lost, with the cause
// ErrLeaderLost, so that work drained after a shutdown began may go on
// while this replica still holds the lease. Without leader election
// leaseCtx never ends.

// ErrLeaderLost, matched with errors.Is, is the cause of a leader context's cancellation
// when the lease was lost, and what Manager.Start then returns unless Recampaign.
var ErrLeaderLost = errors.New("kctl: leader election: lost the lease")

// inTerm is r as run in a term whose lease context is leaseCtx.
func (r Runnable) inTerm(leaseCtx context.Context) Runnable {
	run := r.runTerm
	if run == nil {
		return r
	}
	r.Run = func(ctx context.Context) error { return run(ctx, leaseCtx) }
	return r
}

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
			return fmt.Errorf("kctl: runnable %q failed: %w", r.Name, unprefixed(err))
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

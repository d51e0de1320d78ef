package kctl

// Runnable, as a task of a goroutine group (internal/group, which also
// keeps them until Start, and for every leadership term), and the two
// contexts a term hands its runnables. Add is the Manager's (manager.go),
// lead runs a term (start.go); internal/shutdown has the shutdown's schedule.

import (
	"context"
	"errors"
	"fmt"

	"github.com/kctl-dev/kctl/internal/group"
)

// loggerKey is the context key of the logger kctl puts in the context
// of a runnable (Start) and of a reconcile (handle): LoggerFrom
// (controller_options.go) reads it.
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
	// Busy, if set, says what Run is doing ("3 requests in flight"): the
	// log names it if the shutdown abandons Run, or drains it past its
	// deadline (Manager.DrainDeadline).
	Busy func() string

	// runTerm, if set, is Run for a leader-only runnable that needs its
	// term's lease context too (a controller, to drain at shutdown).
	runTerm func(leaderCtx, leaseCtx context.Context) error
}

// ErrLeaderLost, matched with errors.Is, is the cause of a leader context's cancellation
// when the lease was lost, and what Manager.Start then returns unless Recampaign.
var ErrLeaderLost = errors.New("kctl: leader election: lost the lease")

// inTerm is r as run in a term whose lease context is leaseCtx.
//
// A leadership term hands its leader-only runnables two contexts.
// leaderCtx ends when the term ends: the Manager shuts down, or the lease
// is lost. leaseCtx ends only when the lease is lost, with the cause
// ErrLeaderLost, so that work drained after a shutdown began may go on
// while this replica still holds the lease. Without leader election
// leaseCtx never ends.
func (r Runnable) inTerm(leaseCtx context.Context) group.Task {
	run := r.runTerm
	if run != nil {
		r.Run = func(ctx context.Context) error { return run(ctx, leaseCtx) }
	}
	return r.task()
}

// task is r as a goroutine of a group (internal/group). An error r.Run(ctx)
// returns while ctx has not ended is the group's.
func (r Runnable) task() group.Task {
	run := func(ctx context.Context) error {
		err := r.Run(ctx)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("kctl: runnable %q failed: %w", r.Name, unprefixed(err))
	}
	return group.Task{Name: r.Name, Busy: r.Busy, Run: run}
}

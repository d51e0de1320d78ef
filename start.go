package kctl

// How a Manager runs: Start, in the order it starts and stops things, and
// lead, one leadership term (which runnables run in it, and those added
// during it, is internal/group's Terms).

import (
	"cmp"
	"context"

	"github.com/kctl-dev/kctl/internal/group"
	"github.com/kctl-dev/kctl/internal/misuse"
	"github.com/kctl-dev/kctl/internal/shutdown"
)

// Start runs everything until ctx ends or a runnable fails, then shuts down
// gracefully and returns. The order is:
//  1. start the shared cache (the informers made so far, and any made later),
//  2. start the runnables that do not need leadership, and the Event writers,
//  3. campaign for the lease (ElectLeader), or lead at once without it: while
//     leading, run the controllers and the leader-only runnables. Each
//     controller waits for its own caches to sync, so one whose CRD is not
//     installed holds back no other; /readyz names it, and it starts once its
//     CRD appears.
//
// When ctx ends (internal/shutdown has the exact schedule): runnables' contexts
// end at once; controllers stop taking keys and in-flight reconciles may
// finish until ShutdownTimeout less a reserve (a fifth, at most 2 s), when
// their context is cancelled. Work still running half the reserve later is
// abandoned and named in an ERROR log (runnable, controller and keys); then
// the lease is released and the Event writers write what is left. Start
// returns at most ShutdownTimeout after ctx ended, even if some work ignores
// its context: a reconcile abandoned so may still be running in this process
// when a standby starts on the same object.
//
// Start returns nil only after a clean shutdown: ctx ended (whatever its
// cause) and nothing failed. Otherwise it returns the first error of a
// runnable (the metrics and health servers are runnables too) or of the
// leader election. A replica that lost its lease (ElectLeader without
// Recampaign, or a Shard member's own Lease) returns an error matching
// ErrLeaderLost whatever the cause (renewals refused, timed out on a
// silent network, another holder), even when it was lost while draining
// after ctx ended: let the supervisor restart it. Call it once.
func (m *Manager) Start(ctx context.Context) error {
	caller := ctx
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return misuse.ErrStartTwice
	}
	m.started = true
	err := m.errs.Err()
	if err != nil {
		m.mu.Unlock()
		return err
	}
	logCtx := context.WithValue(caller, loggerKey{}, m.log)
	ctx, cancel := context.WithCancelCause(logCtx)
	defer cancel(nil)
	m.ctx = ctx
	m.cancel = cancel
	m.work = group.New(cancel)

	// 1. The shared cache.
	runCache := func() error { return m.cache.Start(ctx) }
	m.work.Go("cache", nil, runCache)
	// 2. Runnables of every replica, and the Event writers.
	m.everywhere.Start(ctx, m.work)
	m.writers.Start(ctx, cancel) // until Stop, after the rest
	defer m.writers.Stop()
	// 3. The leader work, on this replica while it leads (see lead).
	if m.elect == nil {
		lead := func() error {
			m.lead(ctx, context.WithoutCancel(ctx))
			return nil
		}
		m.work.Go("leader work", nil, lead)
	} else {
		elect := func() error { return m.elect(ctx, m.lead) }
		m.work.Go("leader election", nil, elect)
	}
	m.mu.Unlock()

	<-ctx.Done()
	// Who ended ctx, read at once: the caller (a clean stop), or the
	// Manager itself with the cause of its stop, which is then an error
	// whatever its type (a lost Lease's may wrap DeadlineExceeded).
	byCaller := caller.Err() != nil
	m.schedule.Begin()
	m.log.Info("shutting down", "timeout", m.opts.ShutdownTimeout)
	// The work returns first: the leader work drains, giving up at AbandonAt
	// (lead logs what it abandons); then the lease is released.
	m.work.Wait(ctx, m.schedule.AbandonAt)
	// The Event writers write what the work recorded, until WritesBy.
	m.writers.Stop()
	// Start returns when all that is done, or at the end of ShutdownTimeout.
	abandoned := m.work.Wait(ctx, m.schedule.End)
	stillWriting := m.writers.Wait(ctx, m.schedule.End)
	abandoned = append(abandoned, stillWriting...)
	shutdown.LogAbandoned(m.log, m.opts.ShutdownTimeout, abandoned) // an error naming them, if any
	err = cmp.Or(m.work.Err(), m.writers.Err())
	if err == nil && !byCaller {
		err = context.Cause(ctx)
	}
	return err
}

// lead runs the leader work of one term (the whole run without
// ElectLeader): every leader-only runnable and controller, including those
// added during the term, until leaderCtx ends. It then waits for them; once
// the Manager shuts down, only until the shutdown's AbandonAt, so that the
// lease is released in time even if some of them ignore their context.
func (m *Manager) lead(leaderCtx, leaseCtx context.Context) {
	m.log.Info("leading: starting controllers and leader-only runnables")
	// A failing runnable stops the Manager.
	term := group.New(m.cancel)
	m.terms.Begin(term, leaderCtx, leaseCtx)

	<-leaderCtx.Done()
	// Runnables added from now on wait for the next term.
	m.terms.End()
	abandoned := term.Wait(m.ctx, m.schedule.AbandonAt)
	// an error naming them, if any: another replica may start on the same objects
	shutdown.LogAbandonedTerm(m.log, m.opts.ShutdownTimeout, abandoned)
}

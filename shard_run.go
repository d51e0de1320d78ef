package kctl

// An extra (sharding): one member's run (shardRun.run): join the group,
// then every RenewPeriod (and when a peer's Lease expires, or a peek
// between two finds the members changed) look at the live members,
// assign the ranges (shardhash.AssignWeighted), hand over
// (internal/handover), renew its Lease recording what it holds, and act
// (shard_state.go); on shutdown drain everything and leave; on losing
// its Lease stop all work.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/handover"
	"github.com/kctl-dev/kctl/internal/shardhash"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// run is the member's Runnable: it joins, then looks every RenewPeriod
// and when a peer's Lease expires, until ctx ends, then drains and
// leaves (stop). Between two looks it peeks shardPeeks times. Losing the
// Lease stops the Manager (lose).
func (s *shardRun) run(ctx context.Context) error {
	err := s.join(ctx)
	if err != nil || ctx.Err() != nil {
		return err
	}
	tick := time.NewTicker(s.cfg.RenewPeriod)
	defer tick.Stop()
	var peekAt time.Time
	peeks := 0 // left before the next look
	lookedAt := time.Now()
	for {
		expired := time.After(time.Until(s.renewBy()))
		peerExpires := fireAt(s.expiryAfter(lookedAt))
		peek := fireAt(peekAt)
		var listing <-chan time.Time
		if shardhash.Count(s.starting) > 0 || s.catchingUp() {
			listing = time.After(listingPoll)
		}
		select {
		case <-ctx.Done():
			s.stop(ctx)
			return nil
		case <-s.wake:
			s.updateSelector()
			continue
		case <-listing:
			s.serveListed()
			continue
		case <-expired:
			s.lose(fmt.Errorf("kctl: sharding: not renewed for "+
				"RenewDeadline (%v)", s.cfg.RenewDeadline))
			return nil
		case <-peek:
			peeks--
			peekAt = s.nextPeek(peeks)
			changed, err := s.peek(ctx)
			if err != nil {
				s.lose(err)
				return nil
			}
			if !changed {
				continue
			}
		case <-peerExpires:
		case <-tick.C:
		}
		peeks = shardPeeks
		peekAt = s.nextPeek(peeks)
		lookedAt = time.Now()
		err := s.look(ctx)
		if err == nil && s.hurried() {
			err = s.look(ctx)
		}
		if err != nil {
			s.lose(err)
			return nil
		}
	}
}

// expiryAfter is when the first peer's Lease expires (nextExpiry), if
// that is after the look at lookedAt, else zero: a look that could not
// list or renew has not judged an expiry before it, and must not be
// repeated at once for it (with a server answering errors fast, that
// was a loop of requests until RenewDeadline); a peek that sees the
// expiry asks for a look itself.
func (s *shardRun) expiryAfter(lookedAt time.Time) time.Time {
	at := s.members.nextExpiry()
	if !at.After(lookedAt) {
		return time.Time{}
	}
	return at
}

// fireAt is a channel that receives at t, or nil (never) if t is zero.
func fireAt(t time.Time) <-chan time.Time {
	if t.IsZero() {
		return nil
	}
	return time.After(time.Until(t))
}

// shardPeeks is how many times a member lists its group between two
// looks, every RenewPeriod/(shardPeeks+1).
const shardPeeks = 3

// nextPeek is when to peek with left peeks to go before the next look
// (zero: none).
func (s *shardRun) nextPeek(left int) time.Time {
	if left <= 0 {
		return time.Time{}
	}
	return time.Now().Add(s.cfg.RenewPeriod / (shardPeeks + 1))
}

// peek lists the group between two looks, to see the peers' renewals
// and departures sooner: a peer's Lease expires LeaseDuration after this
// member first saw its last renewal, so a member killed right after a
// renewal has its ranges served again about LeaseDuration +
// RenewPeriod/4 after the kill (plus a look and a hurried one), not
// LeaseDuration + 2 RenewPeriods. It reports whether the live members
// changed since the last look (a look should follow at once): a peer
// left, or another judged it expired and deleted its Lease. It costs
// shardPeeks lists of the group's Leases per RenewPeriod. It returns an
// error only when the member lost its Lease; another waits for the next
// look.
func (s *shardRun) peek(ctx context.Context) (bool, error) {
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx),
		s.renewBy())
	defer cancel()
	view, err := s.members.live(rctx)
	if errors.Is(err, errShardLeaseLost) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	changed := !slices.Equal(view.members, s.lastMembers)
	return changed, nil
}

// hurried reports whether a look should follow at once, not a period
// later: the last one recorded a claim (the next look serves it if no
// peer claimed it meanwhile) or released a range (a peer waits for it).
// Handover's rule holds either way: each look lists after the write
// before it. So a range moves about one look after it is free.
func (s *shardRun) hurried() bool {
	released := s.released
	s.released = false
	claimed := false
	for _, r := range s.hand.Recorded() {
		if s.hand.State(r) == handover.Claimed {
			claimed = true
		}
	}
	return s.recorded && (claimed || released)
}

// renewBy is when the member must have renewed its Lease again, or stop
// all its work: RenewDeadline after the start of its last renewal, so
// before its peers may judge the Lease expired (LeaseDuration after
// they saw that renewal).
func (s *shardRun) renewBy() time.Time {
	return s.renewed.Add(s.cfg.RenewDeadline)
}

// join creates the member's Lease, retrying every RenewPeriod until ctx
// ends; a Forbidden answer is returned (the RBAC must change).
func (s *shardRun) join(ctx context.Context) error {
	err := s.namespaces.WaitForSync(ctx)
	if err != nil {
		return nil // ctx ended
	}
	for ctx.Err() == nil {
		start := time.Now()
		err = s.members.join(ctx)
		if err == nil {
			s.renewed = start
			s.recorded = true
			s.log.Info("sharding: joined the group",
				"ranges", s.cfg.Ranges)
			return nil
		}
		if apierrors.IsForbidden(err) {
			return err
		}
		s.log.Warn("sharding: could not join; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.RenewPeriod):
		}
	}
	return nil
}

// look is one period: list the live members and Look (if the last
// renewal recorded the state), renew recording it, then act. It returns
// an error only when the member lost its Lease or could not renew for
// RenewDeadline.
func (s *shardRun) look(ctx context.Context) error {
	// A write must never succeed unseen: not cancelled with ctx; and
	// no request outlives renewBy.
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx),
		s.renewBy())
	defer cancel()
	var start, drain []int
	if s.recorded {
		view, err := s.members.live(rctx)
		switch {
		case errors.Is(err, errShardLeaseLost):
			return err
		case err != nil:
			s.log.Warn("sharding: could not list the group", "err", err)
		default:
			owners := shardhash.AssignWeighted(view.members,
				s.weights())
			start, drain = s.hand.Look(owners, view.taken)
			s.lastMembers = view.members
			s.setLive(len(view.members))
		}
	}
	begun := time.Now()
	err := s.members.renew(rctx, s.hand.Recorded())
	s.recorded = err == nil
	switch {
	case errors.Is(err, errShardLeaseLost):
		return err
	case err != nil && !time.Now().Before(s.renewBy()):
		return fmt.Errorf("kctl: sharding: could not renew for "+
			"RenewDeadline (%v): %w", s.cfg.RenewDeadline,
			unprefixed(err))
	case err != nil:
		s.log.Warn("sharding: could not renew; retrying", "err", err)
	default:
		s.renewed = begun
	}
	// A probe must not hold back the next renewal: one that times
	// out is tried again at the next look.
	pctx, stopProbe := context.WithTimeout(ctx, s.cfg.RenewPeriod/2)
	defer stopProbe()
	s.probe(pctx)
	s.act(start, drain)
	s.drainStep()
	return nil
}

// probe asks the server, once per resource, whether it honours the
// selector, and logs the mode when it changes. A resource whose probe
// failed is unknown: the mode says so until a later probe tells.
func (s *shardRun) probe(ctx context.Context) {
	s.mu.RLock()
	infs := slices.Clone(s.informers)
	s.mu.RUnlock()
	var unserved, unknown []string
	for _, inf := range infs {
		res := inf.resource()
		served, known := s.served[res]
		if !known {
			ok, err := probeShardSelector(ctx, s.m.conn, res)
			if err != nil {
				s.log.Warn("sharding: could not probe the "+
					"shard selector", "resource", res.String(),
					"err", err)
				unknown = append(unknown, res.String())
				continue
			}
			s.served[res] = ok
			served = ok
		}
		if !served {
			unserved = append(unserved, res.String())
		}
	}
	mode := "server-side selector"
	switch {
	case len(unserved) > 0:
		mode = fmt.Sprintf("client-side filter: memory not "+
			"split (the server ignores the selector on %v)",
			unserved)
	case len(unknown) > 0:
		mode = fmt.Sprintf("not probed yet (the probe of %v "+
			"failed; tried again at the next look)", unknown)
	}
	s.mu.Lock()
	changed := mode != s.mode
	s.mode = mode
	s.mu.Unlock()
	if changed {
		s.log.Info("sharding: the work is split by " + mode)
	}
}

// lose stops all work at once: the member could not renew its Lease in
// time, or a peer deleted it; its peers take its ranges once it
// expires. The Manager stops, and Start returns an error matching
// ErrLeaderLost.
func (s *shardRun) lose(err error) {
	s.hand.Lost()
	clear(s.starting)
	s.mu.Lock()
	clear(s.serving)
	clear(s.held)
	s.mu.Unlock()
	s.series.Owned.Store(0)
	s.log.Error("sharding: lost this member's Lease; "+
		"stopping all work", "err", err)
	cause := fmt.Errorf("kctl: sharding: member %q of group %q "+
		"stopped all its work (%w): %w", s.cfg.Identity,
		s.cfg.Group, unprefixed(ErrLeaderLost), unprefixed(err))
	s.loseWork(cause)
	s.m.mu.Lock()
	cancel := s.m.cancel
	work := s.m.work
	s.m.mu.Unlock()
	cancel(cause)
	// Start returns the first error of the Manager's work: the loss is
	// one, even while draining after the caller's context ended (work
	// was cancelled unfinished).
	failed := func() error { return cause }
	work.Go("shard member's Lease", nil, failed)
}

// stop is a graceful stop: take no key, renew until no reconcile is in
// flight (at most until the shutdown schedule's AbandonAt), then delete the
// Lease, so that the peers take the ranges at their next look. If no
// renewal succeeds for RenewDeadline meanwhile, it cancels the in-flight
// reconciles (lose) before a peer may judge the Lease expired.
func (s *shardRun) stop(ctx context.Context) {
	clear(s.starting)
	s.mu.Lock()
	clear(s.serving)
	s.mu.Unlock()
	s.series.Owned.Store(0)
	if s.keepLease.Load() {
		return
	}
	rctx := context.WithoutCancel(ctx)
	abandonAt := s.m.schedule.AbandonAt()
	next := time.Now().Add(s.cfg.RenewPeriod)
	for s.busy() && time.Now().Before(abandonAt) {
		if time.Now().After(next) {
			s.renewOnce(rctx)
			next = time.Now().Add(s.cfg.RenewPeriod)
		}
		if !time.Now().Before(s.renewBy()) {
			s.lose(fmt.Errorf("kctl: sharding: not renewed for "+
				"RenewDeadline (%v) while draining",
				s.cfg.RenewDeadline))
			return
		}
		time.Sleep(10 * time.Millisecond) // a poll; bounded by AbandonAt
	}
	lctx, cancel := context.WithTimeout(rctx, s.cfg.RenewDeadline)
	defer cancel()
	err := s.members.leave(lctx)
	if err != nil {
		s.log.Warn("sharding: could not delete this member's "+
			"Lease; peers take its ranges once it expires",
			"err", err)
		return
	}
	s.log.Info("sharding: left the group")
}

// renewOnce renews the Lease while a graceful stop drains, within one
// RenewPeriod; a failure is logged: the peers wait for the Lease to
// expire, and the drain goes on until the shutdown schedule's AbandonAt.
func (s *shardRun) renewOnce(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RenewPeriod)
	defer cancel()
	begun := time.Now()
	err := s.members.renew(rctx, s.hand.Recorded())
	if err != nil {
		s.log.Warn("sharding: could not renew while draining",
			"err", err)
		return
	}
	s.renewed = begun
}

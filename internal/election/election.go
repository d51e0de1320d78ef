// Package election is one replica's side of a leader election on a
// coordination.k8s.io/v1 Lease: acquire, renew, observe another holder,
// release (kctl's ElectLeader, and a shard group's leader). It judges a
// lease expired by its own monotonic clock, never by another machine's
// timestamps.
package election

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"time"

	"github.com/kctl-dev/kctl/internal/errtext"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is a completed election (kctl.LeaderElection, field for
// field): the Lease, this replica's identity and the durations.
type Config struct {
	Name           string
	Namespace      string
	Identity       string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	KeepOnShutdown bool
	Recampaign     bool
}

// Store reads and writes the Lease, updating obj from the answer;
// kctl's *Client[coordinationv1.Lease] is one.
type Store interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, obj *coordinationv1.Lease) error
	Update(ctx context.Context, obj *coordinationv1.Lease) error
}

// Elector is one replica's side of an election. Call Run once; its
// goroutine owns the fields.
type Elector struct {
	cfg      Config // completed
	store    Store
	log      *slog.Logger
	onChange func(leading bool)
	// ReleaseBy is the latest time for a release on shutdown (the
	// Manager's); nil: RenewDeadline bounds it
	ReleaseBy func() time.Time
	// Lost is the error a lost lease matches (kctl.e.Lost).
	Lost error
	// Unprefixed is kctl's unprefixed: err without its "kctl: ", to
	// wrap after a prefix.
	Unprefixed func(error) error
	// the lease as last read or written; nil before the first read
	observed *coordinationv1.Lease
	// local (monotonic) time at which observed's spec last changed
	observedAt time.Time
	reported   string // the holder last logged
}

// New makes an Elector on store; cfg must be completed. Set Lost
// before Run.
func New(
	store Store,
	cfg Config,
	log *slog.Logger,
	onChange func(leading bool),
) *Elector {
	if onChange == nil {
		onChange = func(bool) {}
	}
	log = cmp.Or(log, slog.Default())
	log = log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	return &Elector{cfg: cfg, store: store, log: log, onChange: onChange}
}

// Run campaigns until ctx ends. Each time it acquires the lease it calls
// lead(leaderCtx, leaseCtx) in a new goroutine and renews the lease while
// lead runs.
// leaderCtx is cancelled at once (cause Lost) when renewals failed
// for RenewDeadline, another replica holds the lease, or a renewal was
// refused (Forbidden); lead must then return promptly, and Run returns that
// cause unless Recampaign. When ctx ends (or lead returns), Run renews until
// lead has returned, releases the lease and returns nil. A Forbidden answer
// ends Run, even with Recampaign, with an error naming the permission (and
// matching Lost if it came while leading).
func (e *Elector) Run(
	ctx context.Context,
	lead func(leaderCtx, leaseCtx context.Context),
) error {
	e.log.Info("leader election: campaigning for the lease")
	e.onChange(false) // a standby reports 0, not nothing
	period := e.cfg.RetryPeriod
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		// Requests are not cancelled with ctx: a write must never succeed unseen.
		now := time.Now()
		reqCtx := context.WithoutCancel(ctx)
		ok, err := e.try(reqCtx, now, false, period)
		if err != nil {
			return err
		}
		if ok {
			err = e.term(ctx, now, lead)
			lost := errors.Is(err, e.Lost)
			refused := apierrors.IsForbidden(err) // the RBAC must change
			if !lost || refused || !e.cfg.Recampaign || ctx.Err() != nil {
				return err
			}
		}
		jitter := mathrand.N(period/5 + 1)
		wait = period + jitter
	}
}

// try takes or (leading) renews the lease at now within timeout, and reports
// whether it did. A standby takes it only if absent, free, ours or expired by
// our clock; a leader writes over the lease it last saw. An error ends the
// term (Lost) or Run (Forbidden).
func (e *Elector) try(
	ctx context.Context,
	now time.Time,
	leading bool,
	timeout time.Duration,
) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if leading {
		l := e.observed.DeepCopy()
		e.fill(&l.Spec, now, false)
		err := e.store.Update(ctx, l)
		if err == nil {
			e.observe(l, now)
			return true, nil
		}
		stale := apierrors.IsConflict(err) || apierrors.IsNotFound(err)
		if !stale {
			return false, e.failed("update", err)
		}
	}
	l, err := e.store.Get(ctx, e.cfg.Namespace, e.cfg.Name)
	create := apierrors.IsNotFound(err)
	switch {
	case create && leading:
		return false, e.lost("the lease was deleted")
	case create:
		meta := metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name}
		spec := coordinationv1.LeaseSpec{LeaseTransitions: new(int32(0))}
		l = &coordinationv1.Lease{ObjectMeta: meta, Spec: spec}
	case err != nil:
		return false, e.failed("get", err)
	default:
		// After the read: never earlier than the write it shows.
		e.observe(l, time.Now())
	}
	holder := Holder(l)
	ours := holder == e.cfg.Identity
	other := holder != "" && !ours
	// Expired by our clock since we saw its spec change, not by its renewTime.
	d := e.cfg.LeaseDuration
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		d = time.Duration(*s) * time.Second
	}
	if leading && !ours {
		reason := fmt.Sprintf("%q holds it now", holder)
		return false, e.lost(reason)
	}
	expired := time.Since(e.observedAt) > d
	if other && !expired {
		return false, nil
	}
	l = l.DeepCopy()
	e.fill(&l.Spec, now, !ours)
	write := e.store.Update
	verb := "update"
	if create {
		write = e.store.Create
		verb = "create"
	} else if !ours {
		was := *cmp.Or(l.Spec.LeaseTransitions, new(int32(0)))
		l.Spec.LeaseTransitions = new(was + 1)
	}
	err = write(ctx, l)
	if err != nil {
		return false, e.failed(verb, err)
	}
	if other {
		e.log.Info("leader election: took over the lease after it expired",
			"previous", holder)
	}
	e.observe(l, now)
	return true, nil
}

// term runs lead and renews the lease from acquiredAt until lead has
// returned or the lease is lost (see Run). A loss, whatever its cause, is
// returned as an error matching Lost.
func (e *Elector) term(
	ctx context.Context,
	acquiredAt time.Time,
	lead func(leaderCtx, leaseCtx context.Context),
) error {
	e.log.Info("leader election: became leader")
	e.onChange(true)
	renewCtx := context.WithoutCancel(ctx) // renewals go on during shutdown
	leaseCtx, loseLease := context.WithCancelCause(renewCtx)
	leaderCtx, cancel := context.WithCancelCause(ctx)
	defer func() {
		cancel(nil)
		loseLease(nil)
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leaderCtx, leaseCtx)
	}()
	period := e.cfg.RetryPeriod
	renewDeadline := e.cfg.RenewDeadline
	lastRenew := acquiredAt
	next := acquiredAt.Add(period)
	ctxDone := ctx.Done()
	var ok bool
	var err error
	for err == nil {
		deadline := lastRenew.Add(renewDeadline)
		wait := min(time.Until(next), time.Until(deadline))
		select {
		case <-done:
			e.onChange(false)
			shuttingDown := ctx.Err() != nil
			return e.release(renewCtx, shuttingDown)
		case <-ctxDone:
			// leaderCtx has ended too; renew until lead returns.
			ctxDone = nil
			e.log.Info("leader election: shutting down: " +
				"renewing the lease until leader work has returned")
			continue
		case <-time.After(wait):
		}
		now := time.Now()
		switch {
		case !now.Before(deadline):
			reason := fmt.Sprintf("not renewed for %v (RenewDeadline)",
				renewDeadline)
			err = e.lost(reason)
		case !now.Before(next):
			next = now.Add(period)
			timeout := min(time.Until(deadline), renewDeadline/2)
			ok, err = e.try(renewCtx, now, true, timeout)
			if ok {
				// When the request was sent: no later than the server's write.
				lastRenew = now
			}
		}
	}
	cause := err
	then := "run returns ErrLeaderLost"
	if !errors.Is(err, e.Lost) {
		cause = fmt.Errorf("%w: %w", e.Lost, errtext.Unprefixed(err))
	}
	if e.cfg.Recampaign && !apierrors.IsForbidden(err) {
		then = "campaigning again (Recampaign)"
	}
	cancel(cause)
	loseLease(cause)
	e.onChange(false)
	e.log.Error("leader election: lost the lease; leader work cancelled",
		"err", err, "then", then)
	<-done
	return cause
}

// release hands the lease back (holder "", duration 1s) unless
// KeepOnShutdown, for standbys' next attempt. It tries for RenewDeadline, and
// on shutdown at most until ReleaseBy.
func (e *Elector) release(ctx context.Context, shuttingDown bool) error {
	if e.cfg.KeepOnShutdown {
		e.log.Info("leader election: stopped leading; keeping the lease " +
			"(KeepOnShutdown): a standby takes over after LeaseDuration")
		return nil
	}
	deadline := time.Now().Add(e.cfg.RenewDeadline)
	bounded := shuttingDown && e.ReleaseBy != nil
	if bounded && e.ReleaseBy().Before(deadline) {
		deadline = e.ReleaseBy()
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	l := e.observed.DeepCopy()
	now := metav1.NowMicro()
	l.Spec.HolderIdentity = new("")
	l.Spec.LeaseDurationSeconds = new(int32(1))
	l.Spec.RenewTime = &now
	err := e.store.Update(ctx, l)
	if err != nil {
		// Not released: a standby takes over after LeaseDuration.
		return e.failed("update", err)
	}
	e.log.Info("leader election: released the lease")
	return nil
}

// fill makes spec say that we hold the lease, renewed (and if acquiring,
// acquired) at now.
func (e *Elector) fill(
	spec *coordinationv1.LeaseSpec,
	now time.Time,
	acquiring bool,
) {
	t := metav1.NewMicroTime(now)
	// Whole seconds, rounded up.
	seconds := (e.cfg.LeaseDuration + time.Second - 1) / time.Second
	spec.HolderIdentity = new(e.cfg.Identity)
	spec.RenewTime = &t
	spec.LeaseDurationSeconds = new(int32(seconds))
	if acquiring {
		spec.AcquireTime = &t
	}
}

// observe records l, read (or our write of it sent) at at; observedAt moves
// only when the spec changed.
func (e *Elector) observe(l *coordinationv1.Lease, at time.Time) {
	same := e.observed != nil &&
		apiequality.Semantic.DeepEqual(l.Spec, e.observed.Spec)
	if !same {
		e.observedAt = at
	}
	e.observed = l
	h := Holder(l)
	if h == e.reported {
		return
	}
	e.reported = h
	if h != "" && h != e.cfg.Identity {
		e.log.Info("leader election: new leader observed", "leader", h)
	}
}

// failed turns a Forbidden answer into Run's error. It logs any other failure
// but a lost race (conflict), and returns nil: the next attempt retries.
func (e *Elector) failed(verb string, err error) error {
	ns := e.cfg.Namespace
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("kctl: leader election: "+
			"not allowed to %s lease %s/%s: grant get, create, update "+
			"on leases.coordination.k8s.io in namespace %s: %w",
			verb, ns, e.cfg.Name, ns, errtext.Unprefixed(err))
	}
	lostRace := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	if !lostRace {
		e.log.Warn("leader election: lease request failed",
			"verb", verb, "err", err)
	}
	return nil
}

func (e *Elector) lost(reason string) error {
	return fmt.Errorf("%w %s/%s: %s",
		e.Lost, e.cfg.Namespace, e.cfg.Name, reason)
}

// Holder is the identity holding l, "" if none.
func Holder(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return *cmp.Or(l.Spec.HolderIdentity, new(""))
}

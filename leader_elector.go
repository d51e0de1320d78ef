package kctl

// An extra: LeaderElection, the options of an election on one Lease, and
// the elector, its state machine: acquire, renew, observe another holder,
// release. leader.go turns it on (ElectLeader); sharding elects its
// group's leader with it too.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// namespaceFile holds the pod's namespace in a cluster (a variable for tests).
var namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// LeaderElection makes one replica of a Manager, the leader, run the
// controllers while the others wait as warm standbys (caches run everywhere):
//
//	err := mgr.ElectLeader(kctl.LeaderElection{Name: "widget-controller"})
//
// The replicas share a coordination.k8s.io/v1 Lease, written with the
// resourceVersion last read, so of two racing replicas only one wins. A
// standby takes it once released, or once it has seen it unchanged for its
// duration by its own monotonic clock (no other machine's timestamps).
//
//   - A leader that could not renew for RenewDeadline stops at once (its leader
//     context is cancelled), before any standby can judge the lease expired.
//   - On graceful shutdown the lease is renewed until the leader's work has
//     returned (or the Manager abandoned it, see Manager.Start), then
//     released within the Manager's ShutdownTimeout: a standby leads about
//     one RetryPeriod later.
//   - After losing the lease, Manager.Start returns an error matching
//     ErrLeaderLost (let the Deployment restart the process, as with
//     controller-runtime), unless Recampaign makes the replica a standby again.
//
// Only Name is required; the other fields have defaults. The replica needs
// get, create and update on leases.coordination.k8s.io in Namespace.
type LeaderElection struct {
	// the Lease's name; replicas sharing it elect one leader
	Name string
	// the Lease's namespace; defaults to the pod's own (set it outside a cluster)
	Namespace string
	// this replica's name in the Lease, unique; defaults to <hostname>-<random>
	Identity string
	// how long a standby waits, from the last lease change it saw; defaults to 15s
	LeaseDuration time.Duration
	// how long the leader tries to renew before it stops; defaults to 10s,
	// < LeaseDuration
	RenewDeadline time.Duration
	// the interval of renewals and attempts; defaults to 2s, 1.2× < RenewDeadline
	RetryPeriod time.Duration
	// keep the lease on graceful shutdown (standbys wait LeaseDuration);
	// default: release it
	KeepOnShutdown bool
	// after losing the lease campaign again, instead of Manager.Start
	// returning ErrLeaderLost
	Recampaign bool
}

// complete returns c with its defaults filled in, or an error naming the
// field to fix.
func (c LeaderElection) complete() (LeaderElection, error) {
	if c.Name == "" {
		return c, errors.New("kctl: leader election: " +
			"LeaderElection.Name is empty: name the lease, e.g. after the controller")
	}
	if c.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		c.Namespace = strings.TrimSpace(string(b))
		if c.Namespace == "" {
			return c, fmt.Errorf("kctl: leader election: "+
				"set LeaderElection.Namespace for lease %q: "+
				"not running in a cluster (%v)", c.Name, err)
		}
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		suffix := strings.ToLower(rand.Text()[:8])
		c.Identity = cmp.Or(host, "kctl") + "-" + suffix
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, 15*time.Second)
	c.RenewDeadline = cmp.Or(c.RenewDeadline, 10*time.Second)
	c.RetryPeriod = cmp.Or(c.RetryPeriod, 2*time.Second)
	negative := c.RetryPeriod < 0
	tooShort := c.LeaseDuration < time.Second
	leaseOK := c.LeaseDuration > c.RenewDeadline
	renewOK := c.RenewDeadline > c.RetryPeriod*6/5
	if negative || tooShort || !leaseOK || !renewOK {
		return c, fmt.Errorf("kctl: leader election: lease %s/%s: "+
			"LeaseDuration (%v) must be greater than RenewDeadline (%v), "+
			"RenewDeadline (%v) must be greater than 1.2 × RetryPeriod (%v), "+
			"durations must be positive and LeaseDuration at least 1s",
			c.Namespace, c.Name, c.LeaseDuration, c.RenewDeadline,
			c.RenewDeadline, c.RetryPeriod)
	}
	return c, nil
}

// leaseStore reads and writes the Lease, updating obj from the answer;
// *Client[coordinationv1.Lease] is one.
type leaseStore interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, obj *coordinationv1.Lease) error
	Update(ctx context.Context, obj *coordinationv1.Lease) error
}

// elector is one replica's side of a LeaderElection. Call run once; its
// goroutine owns the fields.
type elector struct {
	cfg      LeaderElection // completed
	store    leaseStore
	log      *slog.Logger
	onChange func(leading bool)
	// the latest time for a release on shutdown (the Manager's);
	// nil: RenewDeadline bounds it
	releaseBy func() time.Time
	// the lease as last read or written; nil before the first read
	observed *coordinationv1.Lease
	// local (monotonic) time at which observed's spec last changed
	observedAt time.Time
	reported   string // the holder last logged
}

// newElectorFor makes an elector on store; cfg must be completed.
func newElectorFor(
	store leaseStore,
	cfg LeaderElection,
	log *slog.Logger,
	onChange func(leading bool),
) *elector {
	if onChange == nil {
		onChange = func(bool) {}
	}
	log = cmp.Or(log, slog.Default())
	log = log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	return &elector{cfg: cfg, store: store, log: log, onChange: onChange}
}

// run campaigns until ctx ends. Each time it acquires the lease it calls
// lead(leaderCtx, leaseCtx) in a new goroutine and renews the lease while
// lead runs.
// leaderCtx is cancelled at once (cause ErrLeaderLost) when renewals failed
// for RenewDeadline, another replica holds the lease, or a renewal was
// refused (Forbidden); lead must then return promptly, and run returns that
// cause unless Recampaign. When ctx ends (or lead returns), run renews until
// lead has returned, releases the lease and returns nil. A Forbidden answer
// ends run, even with Recampaign, with an error naming the permission (and
// matching ErrLeaderLost if it came while leading).
func (e *elector) run(
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
			lost := errors.Is(err, ErrLeaderLost)
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
// term (ErrLeaderLost) or run (Forbidden).
func (e *elector) try(
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
	holder := holderOf(l)
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
// returned or the lease is lost (see run). A loss, whatever its cause, is
// returned as an error matching ErrLeaderLost.
func (e *elector) term(
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
	if !errors.Is(err, ErrLeaderLost) {
		cause = fmt.Errorf("%w: %w", ErrLeaderLost, unprefixed(err))
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
// on shutdown at most until releaseBy.
func (e *elector) release(ctx context.Context, shuttingDown bool) error {
	if e.cfg.KeepOnShutdown {
		e.log.Info("leader election: stopped leading; keeping the lease " +
			"(KeepOnShutdown): a standby takes over after LeaseDuration")
		return nil
	}
	deadline := time.Now().Add(e.cfg.RenewDeadline)
	bounded := shuttingDown && e.releaseBy != nil
	if bounded && e.releaseBy().Before(deadline) {
		deadline = e.releaseBy()
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
func (e *elector) fill(
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
func (e *elector) observe(l *coordinationv1.Lease, at time.Time) {
	same := e.observed != nil &&
		apiequality.Semantic.DeepEqual(l.Spec, e.observed.Spec)
	if !same {
		e.observedAt = at
	}
	e.observed = l
	h := holderOf(l)
	if h == e.reported {
		return
	}
	e.reported = h
	if h != "" && h != e.cfg.Identity {
		e.log.Info("leader election: new leader observed", "leader", h)
	}
}

// failed turns a Forbidden answer into run's error. It logs any other failure
// but a lost race (conflict), and returns nil: the next attempt retries.
func (e *elector) failed(verb string, err error) error {
	ns := e.cfg.Namespace
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("kctl: leader election: "+
			"not allowed to %s lease %s/%s: grant get, create, update "+
			"on leases.coordination.k8s.io in namespace %s: %w",
			verb, ns, e.cfg.Name, ns, unprefixed(err))
	}
	lostRace := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	if !lostRace {
		e.log.Warn("leader election: lease request failed",
			"verb", verb, "err", err)
	}
	return nil
}

func (e *elector) lost(reason string) error {
	return fmt.Errorf("%w %s/%s: %s",
		ErrLeaderLost, e.cfg.Namespace, e.cfg.Name, reason)
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return *cmp.Or(l.Spec.HolderIdentity, new(""))
}

package kctl

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
	Name           string        // the Lease's name; replicas sharing it elect one leader
	Namespace      string        // the Lease's namespace; defaults to the pod's own (set it outside a cluster)
	Identity       string        // this replica's name in the Lease, unique; defaults to the hostname, "-" and a random suffix
	LeaseDuration  time.Duration // how long a standby waits, from the last change of the lease it saw; defaults to 15s
	RenewDeadline  time.Duration // how long the leader tries to renew before it stops; defaults to 10s, < LeaseDuration
	RetryPeriod    time.Duration // the interval of renewals and attempts; defaults to 2s, 1.2× < RenewDeadline
	KeepOnShutdown bool          // keep the lease on graceful shutdown (standbys wait LeaseDuration); default: release it
	Recampaign     bool          // after losing the lease campaign again, instead of Manager.Start returning ErrLeaderLost
}

// namespaceFile holds the pod's namespace in a cluster (a variable for tests).
var namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// complete returns c with its defaults filled in, or an error naming the field to fix.
func (c LeaderElection) complete() (LeaderElection, error) {
	if c.Name == "" {
		return c, errors.New("kctl: leader election: LeaderElection.Name is empty: name the lease, e.g. after the controller")
	}
	if c.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		c.Namespace = strings.TrimSpace(string(b))
		if c.Namespace == "" {
			return c, fmt.Errorf("kctl: leader election: set LeaderElection.Namespace for lease %q: not running in a cluster (%v)", c.Name, err)
		}
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = cmp.Or(host, "kctl") + "-" + strings.ToLower(rand.Text()[:8])
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, 15*time.Second)
	c.RenewDeadline = cmp.Or(c.RenewDeadline, 10*time.Second)
	c.RetryPeriod = cmp.Or(c.RetryPeriod, 2*time.Second)
	if c.RetryPeriod < 0 || c.LeaseDuration < time.Second || c.LeaseDuration <= c.RenewDeadline || c.RenewDeadline <= c.RetryPeriod*6/5 {
		return c, fmt.Errorf("kctl: leader election: lease %s/%s: LeaseDuration (%v) must be greater than RenewDeadline (%v), "+
			"RenewDeadline (%v) must be greater than 1.2 × RetryPeriod (%v), durations must be positive and LeaseDuration at least 1s",
			c.Namespace, c.Name, c.LeaseDuration, c.RenewDeadline, c.RenewDeadline, c.RetryPeriod)
	}
	return c, nil
}

// leaseStore reads and writes the Lease, updating obj from the answer; *Client[coordinationv1.Lease] is one.
type leaseStore interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, obj *coordinationv1.Lease) error
	Update(ctx context.Context, obj *coordinationv1.Lease) error
}

// elector is one replica's side of a LeaderElection. Call run once; its goroutine
// owns the fields.
type elector struct {
	cfg        LeaderElection // completed
	store      leaseStore
	log        *slog.Logger
	onChange   func(leading bool)
	releaseBy  func() time.Time      // the latest time for a release on shutdown (the Manager's); nil: RenewDeadline bounds it
	observed   *coordinationv1.Lease // the lease as last read or written; nil before the first read
	observedAt time.Time             // local (monotonic) time at which observed's spec last changed
	reported   string                // the holder last logged
}

// ElectLeader makes controllers and runnables that need leadership run only
// on the replica holding the Lease le.Name (see LeaderElection). Caches run
// on every replica, so a standby takes over warm. Call it at most once,
// before Start. It returns an error if le is incomplete or inconsistent
// (naming the field to fix), or after Start. Without it every replica leads.
func (m *Manager) ElectLeader(le LeaderElection) error {
	return m.electLeader(le, NewClient[coordinationv1.Lease](m.conn))
}

// electLeader is ElectLeader keeping the lease in store (a fake in tests).
func (m *Manager) electLeader(le LeaderElection, store leaseStore) error {
	le, err := le.complete()
	if err != nil {
		return err
	}
	e := newElectorFor(store, le, m.log, func(leading bool) { m.metrics.SetLeader(le.Name, leading) })
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.started:
		return fmt.Errorf("kctl: ElectLeader(%q) after Start: turn leader election on before calling Start", le.Name)
	case m.elect != nil:
		return fmt.Errorf("kctl: ElectLeader(%q) called twice: a Manager holds one lease", le.Name)
	}
	e.releaseBy = m.shutdown.writesBy
	m.elect = e.run
	return nil
}

// newElectorFor makes an elector on store; cfg must be completed.
func newElectorFor(store leaseStore, cfg LeaderElection, log *slog.Logger, onChange func(leading bool)) *elector {
	if onChange == nil {
		onChange = func(bool) {}
	}
	log = cmp.Or(log, slog.Default()).With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	return &elector{cfg: cfg, store: store, log: log, onChange: onChange}
}

// run campaigns until ctx ends. Each time it acquires the lease it calls
// lead(leaderCtx) in a new goroutine and renews the lease while lead runs.
// leaderCtx is cancelled at once (cause ErrLeaderLost) when renewals failed
// for RenewDeadline or another replica holds the lease; lead must then return
// promptly, and run returns that error unless Recampaign. When ctx ends (or
// lead returns), run renews until lead has returned, releases the lease and
// returns nil. A Forbidden answer ends run with an error naming the permission.
func (e *elector) run(ctx context.Context, lead func(leaderCtx, leaseCtx context.Context)) error {
	e.log.Info("leader election: campaigning for the lease")
	e.onChange(false) // a standby reports 0, not nothing
	for wait := time.Duration(0); ; wait = e.cfg.RetryPeriod + mathrand.N(e.cfg.RetryPeriod/5+1) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		now := time.Now() // requests are not cancelled with ctx: a write must never succeed unseen
		if ok, err := e.try(context.WithoutCancel(ctx), now, false, e.cfg.RetryPeriod); err != nil {
			return err
		} else if ok {
			if err := e.term(ctx, now, lead); err == nil || !e.cfg.Recampaign || !errors.Is(err, ErrLeaderLost) || ctx.Err() != nil {
				return err
			}
		}
	}
}

// try takes or (leading) renews the lease at now within timeout, and reports whether it
// did. A standby takes it only if absent, free, ours or expired by our clock; a leader
// writes over the lease it last saw. An error ends the term (ErrLeaderLost) or run (Forbidden).
func (e *elector) try(ctx context.Context, now time.Time, leading bool, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if leading {
		l := e.observed.DeepCopy()
		e.fill(&l.Spec, now, false)
		if err := e.store.Update(ctx, l); err == nil {
			e.observe(l, now)
			return true, nil
		} else if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return false, e.failed("update", err)
		}
	}
	l, err := e.store.Get(ctx, e.cfg.Namespace, e.cfg.Name)
	create := apierrors.IsNotFound(err)
	switch {
	case create && leading:
		return false, e.lost("the lease was deleted")
	case create:
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
			Spec: coordinationv1.LeaseSpec{LeaseTransitions: new(int32(0))}}
	case err != nil:
		return false, e.failed("get", err)
	default:
		e.observe(l, time.Now()) // after the read: never earlier than the write it shows
	}
	holder := holderOf(l)
	d := e.cfg.LeaseDuration // expired by our clock since we saw its spec change; its renewTime says nothing
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		d = time.Duration(*s) * time.Second
	}
	if leading && holder != e.cfg.Identity {
		return false, e.lost(fmt.Sprintf("%q holds it now", holder))
	} else if holder != "" && holder != e.cfg.Identity && time.Since(e.observedAt) <= d {
		return false, nil
	}
	l = l.DeepCopy()
	e.fill(&l.Spec, now, holder != e.cfg.Identity)
	write := e.store.Update
	verb := "update"
	if create {
		write = e.store.Create
		verb = "create"
	} else if holder != e.cfg.Identity {
		l.Spec.LeaseTransitions = new(*cmp.Or(l.Spec.LeaseTransitions, new(int32(0))) + 1)
	}
	if err := write(ctx, l); err != nil {
		return false, e.failed(verb, err)
	}
	if holder != "" && holder != e.cfg.Identity {
		e.log.Info("leader election: took over the lease after it expired", "previous", holder)
	}
	e.observe(l, now)
	return true, nil
}

// term runs lead and renews the lease from acquiredAt until lead has returned or the lease is lost (see run).
func (e *elector) term(ctx context.Context, acquiredAt time.Time, lead func(leaderCtx, leaseCtx context.Context)) error {
	e.log.Info("leader election: became leader")
	e.onChange(true)
	writeCtx := context.WithoutCancel(ctx) // renewals go on during shutdown
	leaseCtx, loseLease := context.WithCancelCause(writeCtx)
	leaderCtx, cancel := context.WithCancelCause(ctx)
	defer func() { cancel(nil); loseLease(nil) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leaderCtx, leaseCtx)
	}()
	lastRenew := acquiredAt
	next := acquiredAt.Add(e.cfg.RetryPeriod)
	ctxDone := ctx.Done()
	var ok bool
	var err error
	for err == nil {
		deadline := lastRenew.Add(e.cfg.RenewDeadline)
		select {
		case <-done:
			e.onChange(false)
			return e.release(writeCtx, ctx.Err() != nil)
		case <-ctxDone: // leaderCtx has ended too; renew until lead returns
			ctxDone = nil
			e.log.Info("leader election: shutting down: renewing the lease until leader work has returned")
			continue
		case <-time.After(min(time.Until(next), time.Until(deadline))):
		}
		switch now := time.Now(); {
		case !now.Before(deadline):
			err = e.lost(fmt.Sprintf("not renewed for %v (RenewDeadline)", e.cfg.RenewDeadline))
		case !now.Before(next):
			next = now.Add(e.cfg.RetryPeriod)
			ok, err = e.try(writeCtx, now, true, min(time.Until(deadline), e.cfg.RenewDeadline/2))
			if ok {
				lastRenew = now // when the request was sent: no later than the server's write
			}
		}
	}
	cause := err
	then := "run returns ErrLeaderLost"
	if !errors.Is(err, ErrLeaderLost) {
		cause = fmt.Errorf("%w: %w", ErrLeaderLost, unprefixed(err))
	}
	if e.cfg.Recampaign {
		then = "campaigning again (Recampaign)"
	}
	cancel(cause)
	loseLease(cause)
	e.onChange(false)
	e.log.Error("leader election: lost the lease; leader work cancelled", "err", err, "then", then)
	<-done
	return err
}

// release hands the lease back (holder "", duration 1s) unless KeepOnShutdown, for standbys' next attempt.
// It tries for RenewDeadline, and on shutdown at most until releaseBy.
func (e *elector) release(ctx context.Context, shuttingDown bool) error {
	if e.cfg.KeepOnShutdown {
		e.log.Info("leader election: stopped leading; keeping the lease (KeepOnShutdown): a standby takes over after LeaseDuration")
		return nil
	}
	deadline := time.Now().Add(e.cfg.RenewDeadline)
	if shuttingDown && e.releaseBy != nil && e.releaseBy().Before(deadline) {
		deadline = e.releaseBy()
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	l := e.observed.DeepCopy()
	now := metav1.NowMicro()
	l.Spec.HolderIdentity = new("")
	l.Spec.LeaseDurationSeconds = new(int32(1))
	l.Spec.RenewTime = &now
	if err := e.store.Update(ctx, l); err != nil {
		return e.failed("update", err) // not released: a standby takes over after LeaseDuration
	}
	e.log.Info("leader election: released the lease")
	return nil
}

// fill makes spec say that we hold the lease, renewed (and if acquiring, acquired) at now.
func (e *elector) fill(spec *coordinationv1.LeaseSpec, now time.Time, acquiring bool) {
	t := metav1.NewMicroTime(now)
	spec.HolderIdentity = new(e.cfg.Identity)
	spec.RenewTime = &t
	spec.LeaseDurationSeconds = new(int32((e.cfg.LeaseDuration + time.Second - 1) / time.Second)) // whole seconds, rounded up
	if acquiring {
		spec.AcquireTime = &t
	}
}

// observe records l, read (or our write of it sent) at at; observedAt moves only when the spec changed.
func (e *elector) observe(l *coordinationv1.Lease, at time.Time) {
	if e.observed == nil || !apiequality.Semantic.DeepEqual(l.Spec, e.observed.Spec) {
		e.observedAt = at
	}
	e.observed = l
	if h := holderOf(l); h != e.reported {
		e.reported = h
		if h != "" && h != e.cfg.Identity {
			e.log.Info("leader election: new leader observed", "leader", h)
		}
	}
}

// failed turns a Forbidden answer into run's error. It logs any other failure
// but a lost race (conflict), and returns nil: the next attempt retries.
func (e *elector) failed(verb string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("kctl: leader election: not allowed to %s lease %s/%s: grant get, create, update on leases.coordination.k8s.io in namespace %s: %w",
			verb, e.cfg.Namespace, e.cfg.Name, e.cfg.Namespace, unprefixed(err))
	} else if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		e.log.Warn("leader election: lease request failed", "verb", verb, "err", err)
	}
	return nil
}

func (e *elector) lost(reason string) error {
	return fmt.Errorf("%w %s/%s: %s", ErrLeaderLost, e.cfg.Namespace, e.cfg.Name, reason)
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return *cmp.Or(l.Spec.HolderIdentity, new(""))
}

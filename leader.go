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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeaderElection makes one replica of a Manager, the leader, run the
// controllers while the others wait as warm standbys (caches run everywhere):
//
//	mgr, err := kctl.NewManager(kctl.Options{LeaderElection: kctl.LeaderElection{Name: "widget-controller"}})
//
// The replicas share a coordination.k8s.io/v1 Lease named Name in Namespace,
// which the leader renews every RetryPeriod. A standby takes the lease once
// its holder released it, or once the standby has seen it unchanged for its
// duration by its own monotonic clock: another machine's timestamps are never
// compared with ours, so clock skew does not matter. Every write carries the
// resourceVersion last read, so of two replicas racing only one wins.
//
// # Guarantees
//
//   - A leader that could not renew for RenewDeadline stops at once (its
//     leader context is cancelled), before any standby can judge the lease
//     expired, because RenewDeadline < LeaseDuration.
//   - On graceful shutdown the lease stays renewed until the leader's work has
//     returned, and is then released, so a standby leads about one
//     RetryPeriod later instead of a LeaseDuration (unless KeepOnShutdown).
//   - After losing the lease, Manager.Start returns an error matching
//     ErrLeaderLost (let the Deployment restart the process, as with
//     controller-runtime), unless Recampaign makes the replica a standby again.
//
// The zero value turns leader election off: it is on when Name is set. The
// replica needs get, create and update on leases.coordination.k8s.io in
// Namespace. A LeaderElection is a plain value.
type LeaderElection struct {
	Name string // the Lease's name; replicas sharing it elect one leader
	// Namespace defaults to the pod's own namespace; outside a cluster, set it.
	Namespace string
	// Identity names this replica in the Lease; no two replicas may share one.
	// Defaults to the hostname, "-" and a random suffix.
	Identity string
	// LeaseDuration is how long a standby waits, from the last change of the
	// lease it saw, before taking an unreleased lease. Defaults to 15s; the
	// Lease holds it in whole seconds, rounded up.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew before it stops
	// leading. Defaults to 10s; it must be less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the interval of renewals and of standbys' attempts.
	// Defaults to 2s; 1.2 RetryPeriods must be less than RenewDeadline.
	RetryPeriod time.Duration
	// KeepOnShutdown keeps the lease held on graceful shutdown: standbys
	// then wait LeaseDuration. Defaults to false (release it).
	KeepOnShutdown bool
	// Recampaign makes a replica that lost the lease campaign again instead
	// of Manager.Start returning ErrLeaderLost. Defaults to false.
	Recampaign bool
}

// ErrLeaderLost is the cause of a leader context's cancellation when the
// lease was lost, and what Manager.Start returns then unless Recampaign.
// Match it with errors.Is: the error also names the lease and the reason.
var ErrLeaderLost = errors.New("kctl: leader election: lost the lease")

// namespaceFile holds the pod's namespace in a cluster (a variable for tests).
var namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// complete returns c with its defaults filled in, or an error naming the
// field to fix.
func (c LeaderElection) complete() (LeaderElection, error) {
	if c.Name == "" {
		return c, errors.New("kctl: leader election: LeaderElection.Name is empty: name the lease, e.g. after the controller")
	}
	if c.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		if c.Namespace = strings.TrimSpace(string(b)); c.Namespace == "" {
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
	switch lease := c.Namespace + "/" + c.Name; {
	case c.RetryPeriod < 0 || c.RenewDeadline < 0 || c.LeaseDuration < time.Second:
		return c, fmt.Errorf("kctl: leader election: lease %s: durations must be positive and LeaseDuration at least 1s, got LeaseDuration %v, RenewDeadline %v, RetryPeriod %v",
			lease, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return c, fmt.Errorf("kctl: leader election: lease %s: LeaseDuration (%v) must be greater than RenewDeadline (%v)", lease, c.LeaseDuration, c.RenewDeadline)
	case c.RenewDeadline <= c.RetryPeriod*6/5:
		return c, fmt.Errorf("kctl: leader election: lease %s: RenewDeadline (%v) must be greater than 1.2 × RetryPeriod (%v)", lease, c.RenewDeadline, c.RetryPeriod)
	}
	return c, nil
}

// leaseStore is how an elector reads and writes its Lease; a
// *Client[coordinationv1.Lease] is one. Writes update obj from the answer.
type leaseStore interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, obj *coordinationv1.Lease) error
	Update(ctx context.Context, obj *coordinationv1.Lease) error
}

// elector is one replica's side of a LeaderElection. Call run once; every
// field below belongs to run's goroutine.
type elector struct {
	cfg      LeaderElection // completed
	store    leaseStore
	log      *slog.Logger
	onChange func(leading bool)

	observed   *coordinationv1.Lease // the lease as last read or written; nil before the first read
	observedAt time.Time             // local (monotonic) time at which observed's record last changed
	reported   string                // the holder last logged
}

// newElector fills in cfg's defaults and checks them. It starts nothing.
func newElector(conn *Conn, cfg LeaderElection, log *slog.Logger, onChange func(leading bool)) (*elector, error) {
	cfg, err := cfg.complete()
	if err != nil {
		return nil, err
	}
	return newElectorFor(NewClient[coordinationv1.Lease](conn), cfg, log, onChange), nil
}

// newElectorFor makes an elector on store; cfg must be completed.
func newElectorFor(store leaseStore, cfg LeaderElection, log *slog.Logger, onChange func(leading bool)) *elector {
	if onChange == nil {
		onChange = func(bool) {}
	}
	log = cmp.Or(log, slog.Default()).With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	return &elector{cfg: cfg, store: store, log: log, onChange: onChange}
}

// leaseKey carries a term's lease context in its leader context.
type leaseKey struct{}

// leaseContext returns a context for work that may outlive leaderCtx, such as
// in-flight reconciles drained after a graceful shutdown began: it is not
// cancelled by that shutdown, only (cause ErrLeaderLost) when the lease is
// lost, which a drain must then stop for. Outside an elected term it is
// context.WithoutCancel(leaderCtx).
func leaseContext(leaderCtx context.Context) context.Context {
	if ctx, ok := leaderCtx.Value(leaseKey{}).(context.Context); ok {
		return ctx
	}
	return context.WithoutCancel(leaderCtx)
}

// run campaigns until ctx ends. Each time it acquires the lease it calls
// lead(leaderCtx) in a new goroutine and renews the lease while lead runs.
// leaderCtx is cancelled at once, with a cause matching ErrLeaderLost, when
// renewals failed for RenewDeadline or another replica holds the lease;
// lead must then return promptly, and run waits for it. After a loss run
// returns that error, unless Recampaign. When ctx ends, leaderCtx ends too,
// the lease stays renewed until lead has returned, and then is released
// (unless KeepOnShutdown); run returns nil. If lead returns while ctx is
// live, the term ends the same way. Work that outlives leaderCtx (a drain)
// must use leaseContext(leaderCtx). A Forbidden answer from the API server
// ends run with an error naming the missing permission.
func (e *elector) run(ctx context.Context, lead func(leaderCtx context.Context)) error {
	for {
		acquiredAt, err := e.acquire(ctx)
		if err != nil || acquiredAt.IsZero() {
			return err
		}
		if ctx.Err() != nil { // acquired while ctx ended: hand it straight back
			return e.release(context.WithoutCancel(ctx))
		}
		err = e.term(ctx, acquiredAt, lead)
		if err == nil || !e.cfg.Recampaign || !errors.Is(err, ErrLeaderLost) || ctx.Err() != nil {
			return err
		}
	}
}

// acquire tries to take the lease every RetryPeriod (plus up to 20% jitter)
// and returns when it did, or with the zero time when ctx ended first.
func (e *elector) acquire(ctx context.Context) (time.Time, error) {
	e.log.Info("leader election: campaigning for the lease")
	e.onChange(false) // a standby reports 0, not nothing
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, nil
		case <-timer.C:
		}
		now := time.Now()
		ok, err := e.tryAcquire(context.WithoutCancel(ctx), now)
		if err != nil || ok {
			return now, err
		}
		timer.Reset(e.cfg.RetryPeriod + mathrand.N(e.cfg.RetryPeriod/5+1))
	}
}

// tryAcquire reads the lease and takes it if it is absent, free, ours, or
// expired by our clock. Its requests are not cancelled with the caller's ctx
// (a write must never succeed unseen); they time out after one RetryPeriod.
func (e *elector) tryAcquire(ctx context.Context, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RetryPeriod)
	defer cancel()
	cur, err := e.store.Get(ctx, e.cfg.Namespace, e.cfg.Name)
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name}}
		e.fill(&l.Spec, now, true)
		l.Spec.LeaseTransitions = new(int32(0))
		if err := e.store.Create(ctx, l); err != nil {
			return false, e.failed("create", err)
		}
		e.observe(l, now)
		return true, nil
	} else if err != nil {
		return false, e.failed("get", err)
	}
	e.observe(cur, time.Now()) // after the read: never earlier than the write it shows
	holder := holderOf(cur)
	if holder != "" && holder != e.cfg.Identity && !e.expired(time.Now()) {
		return false, nil
	}
	l := cur.DeepCopy()
	e.fill(&l.Spec, now, holder != e.cfg.Identity)
	if holder != e.cfg.Identity {
		l.Spec.LeaseTransitions = new(derefInt32(l.Spec.LeaseTransitions) + 1)
	}
	if err := e.store.Update(ctx, l); err != nil {
		return false, e.failed("update", err)
	}
	if holder != "" && holder != e.cfg.Identity {
		e.log.Info("leader election: took over the lease after it expired", "previous", holder)
	}
	e.observe(l, now)
	return true, nil
}

// term is one term as leader, from acquiredAt: it runs lead and renews the
// lease until lead has returned or the lease is lost (see run).
func (e *elector) term(ctx context.Context, acquiredAt time.Time, lead func(context.Context)) error {
	e.log.Info("leader election: became leader")
	e.onChange(true)
	writeCtx := context.WithoutCancel(ctx) // renewals go on during shutdown
	leaseCtx, loseLease := context.WithCancelCause(writeCtx)
	leaderCtx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, leaseCtx))
	defer loseLease(nil)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leaderCtx)
	}()
	lose := func(err error) error {
		cause := err
		if !errors.Is(err, ErrLeaderLost) {
			cause = fmt.Errorf("%w: %w", ErrLeaderLost, err)
		}
		cancel(cause)
		loseLease(cause)
		e.onChange(false)
		then := "run returns ErrLeaderLost"
		if e.cfg.Recampaign {
			then = "campaigning again (Recampaign)"
		}
		e.log.Error("leader election: lost the lease; leader work cancelled", "err", err, "then", then)
		<-done
		return err
	}

	lastRenew, next := acquiredAt, acquiredAt.Add(e.cfg.RetryPeriod)
	ctxDone := ctx.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(time.Until(earliest(next, lastRenew.Add(e.cfg.RenewDeadline))))
		select {
		case <-done:
			e.onChange(false)
			return e.release(writeCtx)
		case <-ctxDone: // leaderCtx has ended too; renew until lead returns
			ctxDone = nil
			e.log.Info("leader election: shutting down: renewing the lease until leader work has returned")
			continue
		case <-timer.C:
		}
		now := time.Now()
		if now.Sub(lastRenew) >= e.cfg.RenewDeadline {
			return lose(e.lost(fmt.Sprintf("not renewed for %v (RenewDeadline)", e.cfg.RenewDeadline)))
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(e.cfg.RetryPeriod)
		if ok, err := e.renew(writeCtx, now, lastRenew.Add(e.cfg.RenewDeadline)); err != nil {
			return lose(err)
		} else if ok {
			lastRenew = now // when the request was sent: no later than the server's write
		}
	}
}

// renew writes a new renewTime over the observed lease. It reports false
// for a failure worth retrying, and an error when leading must stop: another
// replica holds the lease, it was deleted, or access is forbidden.
func (e *elector) renew(ctx context.Context, now, deadline time.Time) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, earliest(deadline, now.Add(e.cfg.RenewDeadline/2)))
	defer cancel()
	l := e.observed.DeepCopy()
	e.fill(&l.Spec, now, false)
	err := e.store.Update(ctx, l)
	if err == nil {
		e.observe(l, now)
		return true, nil
	}
	if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return false, e.failed("update", err)
	}
	cur, err := e.store.Get(ctx, e.cfg.Namespace, e.cfg.Name) // someone else wrote: see what
	if apierrors.IsNotFound(err) {
		return false, e.lost("the lease was deleted")
	} else if err != nil {
		return false, e.failed("get", err)
	}
	e.observe(cur, time.Now())
	if h := holderOf(cur); h != e.cfg.Identity {
		return false, e.lost(fmt.Sprintf("%q holds it now", h))
	}
	return false, nil // still ours (the answer to our last write was lost?): retry next period
}

// release hands the lease back (holder "", duration 1s) unless
// KeepOnShutdown, so that standbys take it at their next attempt.
func (e *elector) release(ctx context.Context) error {
	if e.cfg.KeepOnShutdown {
		e.log.Info("leader election: stopped leading; keeping the lease (KeepOnShutdown): a standby takes over after LeaseDuration")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	l := e.observed.DeepCopy()
	now := metav1.NowMicro()
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = new(""), new(int32(1)), &now
	if err := e.store.Update(ctx, l); apierrors.IsForbidden(err) {
		return e.forbidden("update", err)
	} else if err != nil {
		e.log.Warn("leader election: could not release the lease: a standby takes over after LeaseDuration", "err", err)
		return nil
	}
	e.log.Info("leader election: released the lease")
	return nil
}

// fill makes spec say that this replica holds the lease, renewed at now;
// acquiring also sets acquireTime.
func (e *elector) fill(spec *coordinationv1.LeaseSpec, now time.Time, acquiring bool) {
	t := metav1.NewMicroTime(now)
	spec.HolderIdentity = new(e.cfg.Identity)
	spec.LeaseDurationSeconds = new(int32((e.cfg.LeaseDuration + time.Second - 1) / time.Second))
	spec.RenewTime = &t
	if acquiring {
		spec.AcquireTime = &t
	}
}

// observe records l as the current lease; at is when it was read (or when
// our write of it was sent). observedAt moves only when the record changed:
// holder, renewTime, duration or transitions.
func (e *elector) observe(l *coordinationv1.Lease, at time.Time) {
	type record struct {
		holder                string
		renew                 int64
		duration, transitions int32
	}
	recordOf := func(l *coordinationv1.Lease) record {
		r := record{holderOf(l), 0, derefInt32(l.Spec.LeaseDurationSeconds), derefInt32(l.Spec.LeaseTransitions)}
		if l.Spec.RenewTime != nil {
			r.renew = l.Spec.RenewTime.UnixMicro()
		}
		return r
	}
	if e.observed == nil || recordOf(l) != recordOf(e.observed) {
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

// expired reports whether the observed lease's duration has passed, on our
// clock, since we saw its record change. Its renewTime is never consulted.
func (e *elector) expired(now time.Time) bool {
	d := e.cfg.LeaseDuration
	if s := e.observed.Spec.LeaseDurationSeconds; s != nil {
		d = time.Duration(*s) * time.Second
	}
	return now.Sub(e.observedAt) > d
}

// failed turns a Forbidden answer into run's error; it logs any other
// failure but a lost race (conflict), and returns nil: the next attempt retries.
func (e *elector) failed(verb string, err error) error {
	if apierrors.IsForbidden(err) {
		return e.forbidden(verb, err)
	}
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		e.log.Warn("leader election: lease request failed; retrying", "verb", verb, "err", err)
	}
	return nil
}

func (e *elector) forbidden(verb string, err error) error {
	return fmt.Errorf("kctl: leader election: not allowed to %s lease %s/%s: grant get, create, update on leases.coordination.k8s.io in namespace %s: %w",
		verb, e.cfg.Namespace, e.cfg.Name, e.cfg.Namespace, err)
}

func (e *elector) lost(reason string) error {
	return fmt.Errorf("%w %s/%s: %s", ErrLeaderLost, e.cfg.Namespace, e.cfg.Name, reason)
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

package kctl

import (
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
// controllers while the other replicas wait as warm standbys (their caches
// run, their controllers do not):
//
//	mgr, err := kctl.NewManager(kctl.Options{Config: cfg,
//		LeaderElection: kctl.LeaderElection{Name: "widget-controller"}})
//
// The replicas share a coordination.k8s.io/v1 Lease named Name in Namespace.
// The leader renews it every RetryPeriod. A standby takes the lease when its
// holder released it, or when the standby has seen no change to it for the
// lease's duration, measured by the standby's own monotonic clock: timestamps
// written by another machine are never compared with ours, so clock skew does
// not matter. Every write carries the resourceVersion last read, so of two
// replicas writing the same version only one wins.
//
// # Guarantees
//
//   - A leader that could not renew for RenewDeadline cancels its leader
//     context at once, before any standby can judge the lease expired
//     (RenewDeadline < LeaseDuration). Work that stops when that context ends
//     never overlaps with a new leader's.
//   - Graceful shutdown cancels the leader context, keeps the lease renewed
//     until the leader's work has returned, then releases it (unless
//     KeepOnShutdown), so a standby leads within about one RetryPeriod
//     instead of a LeaseDuration.
//   - A lost lease ends Manager.Start with an error matching ErrLeaderLost
//     (let the Deployment restart the process, as controller-runtime does),
//     or, with Recampaign, the replica becomes a standby again.
//
// The zero value turns leader election off; it is on when Name is set. The
// replica's service account needs get, create and update on
// leases.coordination.k8s.io in Namespace. A LeaderElection is a plain value.
type LeaderElection struct {
	// Name is the Lease's name; replicas that share it elect one leader.
	Name string
	// Namespace is the Lease's namespace. Defaults to the namespace of the
	// pod's service account; outside a cluster it must be set.
	Namespace string
	// Identity names this replica in the Lease. Defaults to the hostname
	// plus "-" and a random suffix; two replicas must never share one.
	Identity string
	// LeaseDuration is how long a standby waits, from the last change it
	// saw, before it takes an unreleased lease. Defaults to 15s; whole
	// seconds (rounded up) go into the Lease.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leading. Defaults to 10s; must be less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the interval of renewals and of standbys' attempts.
	// Defaults to 2s; RenewDeadline must exceed 1.2 RetryPeriods.
	RetryPeriod time.Duration
	// KeepOnShutdown leaves the lease held on graceful shutdown, so standbys
	// wait LeaseDuration. Defaults to false: the lease is released.
	KeepOnShutdown bool
	// Recampaign makes a replica that lost the lease campaign again instead
	// of Manager.Start returning ErrLeaderLost. Defaults to false.
	Recampaign bool
}

// ErrLeaderLost is the cause of a leader context's cancellation when the
// lease was lost, and the error Manager.Start returns after that unless
// LeaderElection.Recampaign is set. Test for it with errors.Is: the error
// returned also names the lease and the reason.
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
		if host == "" {
			host = "kctl"
		}
		c.Identity = host + "-" + strings.ToLower(rand.Text()[:8])
	}
	for _, d := range []struct {
		p   *time.Duration
		def time.Duration
	}{{&c.LeaseDuration, 15 * time.Second}, {&c.RenewDeadline, 10 * time.Second}, {&c.RetryPeriod, 2 * time.Second}} {
		if *d.p == 0 {
			*d.p = d.def
		}
	}
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

// elector is one replica's side of a LeaderElection. run is its one method:
// an elector runs once, and every field below belongs to run's goroutine.
type elector struct {
	cfg      LeaderElection // completed
	store    leaseStore
	log      *slog.Logger
	onChange func(leading bool)

	observed   *coordinationv1.Lease // the lease as last read or written; nil before the first read
	observedAt time.Time             // local (monotonic) time observed's record last changed
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
	if log == nil {
		log = slog.Default()
	}
	if onChange == nil {
		onChange = func(bool) {}
	}
	log = log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	return &elector{cfg: cfg, store: store, log: log, onChange: onChange}
}

// run campaigns until ctx ends. Each time it acquires the lease it calls
// lead(leaderCtx) in a new goroutine and renews the lease while lead runs.
// leaderCtx is cancelled at once, with a cause matching ErrLeaderLost, when
// renewals failed for RenewDeadline or another replica holds the lease;
// lead must then return promptly, and run waits for it. After a loss run
// returns that error, unless Recampaign. When ctx ends, leaderCtx ends too,
// the lease stays renewed until lead has returned, and then is released
// (unless KeepOnShutdown); run returns nil. If lead returns while ctx is
// still live, the term ends the same way. A Forbidden answer from the API
// server ends run with an error naming the missing permission.
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
// until it succeeds, returning when it did; it returns the zero time when
// ctx ended first.
func (e *elector) acquire(ctx context.Context) (time.Time, error) {
	e.log.Info("leader election: campaigning for the lease")
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
// expired by our clock. Requests are not cancelled with the caller's ctx,
// so a write never succeeds unseen; they time out after one RetryPeriod.
func (e *elector) tryAcquire(ctx context.Context, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RetryPeriod)
	defer cancel()
	cur, err := e.store.Get(ctx, e.cfg.Namespace, e.cfg.Name)
	switch {
	case apierrors.IsNotFound(err):
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name}}
		e.fill(&l.Spec, now, true)
		l.Spec.LeaseTransitions = new(int32(0))
		if err := e.store.Create(ctx, l); err != nil {
			return false, e.failed("create", err)
		}
		e.observe(l, now)
		return true, nil
	case err != nil:
		return false, e.failed("get", err)
	}
	e.observe(cur, time.Now()) // after the read: never earlier than the write we saw
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
	leaderCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leaderCtx)
	}()

	writeCtx := context.WithoutCancel(ctx) // renewals go on during shutdown
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
			e.log.Info("leader election: shutting down: waiting for leader work to return before releasing the lease")
			continue
		case <-timer.C:
		}
		now := time.Now()
		if now.Sub(lastRenew) >= e.cfg.RenewDeadline {
			return e.lose(cancel, done, e.lost(fmt.Sprintf("not renewed for %v (RenewDeadline)", e.cfg.RenewDeadline)))
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(e.cfg.RetryPeriod)
		ok, err := e.renew(writeCtx, now, lastRenew.Add(e.cfg.RenewDeadline))
		if err != nil {
			return e.lose(cancel, done, err)
		}
		if ok {
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
	switch {
	case apierrors.IsNotFound(err):
		return false, e.lost("the lease was deleted")
	case err != nil:
		return false, e.failed("get", err)
	}
	e.observe(cur, time.Now())
	if h := holderOf(cur); h != e.cfg.Identity {
		return false, e.lost(fmt.Sprintf("%q holds it now", h))
	}
	return false, nil // still ours (our last write's answer was lost?): retry next period
}

// lose ends a term: it cancels the leader context with err, reports the
// loss, and waits for lead to return.
func (e *elector) lose(cancel context.CancelCauseFunc, done <-chan struct{}, err error) error {
	if errors.Is(err, ErrLeaderLost) {
		cancel(err)
	} else {
		cancel(fmt.Errorf("%w: %w", ErrLeaderLost, err))
	}
	e.onChange(false)
	then := "run returns ErrLeaderLost"
	if e.cfg.Recampaign {
		then = "campaigning again (Recampaign)"
	}
	e.log.Error("leader election: lost the lease; leader work cancelled", "err", err, "then", then)
	<-done
	return err
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
	for range 2 { // a second try if our last renewal's answer was lost
		l := e.observed.DeepCopy()
		now := metav1.NowMicro()
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = new(string), new(int32(1)), &now
		err := e.store.Update(ctx, l)
		if err == nil {
			e.observe(l, time.Now())
			e.log.Info("leader election: released the lease")
			return nil
		}
		if !apierrors.IsConflict(err) {
			if apierrors.IsForbidden(err) {
				return e.forbidden("update", err)
			}
			e.log.Warn("leader election: could not release the lease: a standby takes over after LeaseDuration", "err", err)
			return nil
		}
		cur, err := e.store.Get(ctx, e.cfg.Namespace, e.cfg.Name)
		if err != nil || holderOf(cur) != e.cfg.Identity {
			return nil // gone or someone else's: nothing to release
		}
		e.observe(cur, time.Now())
	}
	return nil
}

// fill sets spec to this replica holding the lease, renewed at now;
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
// our write of it was sent). observedAt moves only when the record changed.
func (e *elector) observe(l *coordinationv1.Lease, at time.Time) {
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

// failed turns a failed request into an error for a Forbidden answer, and
// otherwise logs it and returns nil: the next attempt retries.
func (e *elector) failed(verb string, err error) error {
	if apierrors.IsForbidden(err) {
		return e.forbidden(verb, err)
	}
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) { // a conflict means another replica won this round
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

// leaseRecord is what a holder changes on every write; a change of it
// restarts the lease's duration for observers.
type leaseRecord struct {
	holder              string
	renewMicros         int64
	duration, transited int32
}

func recordOf(l *coordinationv1.Lease) leaseRecord {
	r := leaseRecord{holder: holderOf(l), duration: derefInt32(l.Spec.LeaseDurationSeconds), transited: derefInt32(l.Spec.LeaseTransitions)}
	if l.Spec.RenewTime != nil {
		r.renewMicros = l.Spec.RenewTime.UnixMicro()
	}
	return r
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

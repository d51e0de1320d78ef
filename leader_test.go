package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Unit tests run in a synctest bubble against memLeases, an in-memory lease
// store with the API server's resourceVersion rules; integration tests
// (TestElector_API_*, TestManager_LeaderElection_*) use the real API server.

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// memLeases is a one-lease store that behaves like the API server: writes
// need the current resourceVersion and bump it. put writes as another
// machine would.
type memLeases struct {
	mu     sync.Mutex
	lease  *coordinationv1.Lease // nil: absent
	rv     int
	writes int
}

func (s *memLeases) Get(_ context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		return nil, apierrors.NewNotFound(leasesResource, name)
	}
	return s.lease.DeepCopy(), nil
}

func (s *memLeases) Create(_ context.Context, l *coordinationv1.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != nil {
		return apierrors.NewAlreadyExists(leasesResource, l.Name)
	}
	s.storeLocked(l)
	return nil
}

func (s *memLeases) Update(_ context.Context, l *coordinationv1.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.lease == nil:
		return apierrors.NewNotFound(leasesResource, l.Name)
	case l.ResourceVersion != s.lease.ResourceVersion:
		return apierrors.NewConflict(leasesResource, l.Name, errors.New("the object has been modified"))
	}
	s.storeLocked(l)
	return nil
}

// storeLocked saves a copy of l with the next resourceVersion, which it also
// sets on l. s.mu must be held.
func (s *memLeases) storeLocked(l *coordinationv1.Lease) {
	s.rv++
	s.writes++
	l.ResourceVersion = fmt.Sprint(s.rv)
	s.lease = l.DeepCopy()
}

// put overwrites the lease as another machine would.
func (s *memLeases) put(spec coordinationv1.LeaseSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeLocked(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"}, Spec: spec})
}

// get returns a copy of the lease (nil if absent) and how many writes it had.
func (s *memLeases) get() (*coordinationv1.Lease, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease.DeepCopy(), s.writes
}

// replica runs one elector; its lead function records each term and counts
// itself in leaders while its work runs.
type replica struct {
	id      string
	store   *faultyLeases
	e       *elector
	leaders *atomic.Int32
	drain   time.Duration // lead's work goes on this long after leaderCtx ended, or until the lease is lost
	logs    *logBuffer
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // run's result, once done is closed

	mu      sync.Mutex
	terms   []termRecord
	changes []bool // onChange calls
}

type termRecord struct {
	start, cancelled, end time.Time
	cause                 error
}

// testLeaderElection is the configuration of the tests in a bubble: the defaults.
func testLeaderElection(id string) LeaderElection {
	return LeaderElection{Name: "lease", Namespace: "ns", Identity: id}
}

// startReplica starts an elector for cfg on store; it is stopped when the test ends.
func startReplica(t *testing.T, store leaseStore, leaders *atomic.Int32, cfg LeaderElection, drain time.Duration) *replica {
	t.Helper()
	cfg, err := cfg.complete()
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: cfg.Identity, store: &faultyLeases{leaseStore: store}, leaders: leaders, drain: drain, logs: &logBuffer{}, done: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.e = newElectorFor(r.store, cfg, log, func(leading bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.changes = append(r.changes, leading)
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = r.e.run(ctx, r.lead(t))
	}()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("logs of %s:\n%s", r.id, r.logs.String())
		}
	})
	return r
}

func (r *replica) lead(t *testing.T) func(leaderCtx, leaseCtx context.Context) {
	return func(leaderCtx, leaseCtx context.Context) {
		if n := r.leaders.Add(1); n > 1 {
			t.Errorf("%s started leading at %v while %d other replicas lead", r.id, time.Now(), n-1)
		}
		r.mu.Lock()
		r.terms = append(r.terms, termRecord{start: time.Now()})
		i := len(r.terms) - 1
		r.mu.Unlock()
		<-leaderCtx.Done()
		r.mu.Lock()
		r.terms[i].cancelled, r.terms[i].cause = time.Now(), context.Cause(leaderCtx)
		r.mu.Unlock()
		select { // an in-flight reconcile draining after a graceful shutdown began
		case <-time.After(r.drain):
		case <-leaseCtx.Done():
		}
		r.leaders.Add(-1)
		r.mu.Lock()
		r.terms[i].end = time.Now()
		r.mu.Unlock()
	}
}

// leading reports whether r's lead function runs and its context is live.
func (r *replica) leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.terms) > 0 && r.terms[len(r.terms)-1].cancelled.IsZero()
}

func (r *replica) termList() []termRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]termRecord(nil), r.terms...)
}

// waitDone waits for run to return by itself, failing after limit.
func (r *replica) waitDone(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(limit):
		t.Fatalf("%s's run has not returned after %v", r.id, limit)
	}
}

// stop cancels r's context and waits for run to return.
func (r *replica) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// bubbleWaitUntil advances the bubble's clock in small steps until cond holds,
// failing after limit; it returns how long that took.
func bubbleWaitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for synctest.Wait(); !cond(); synctest.Wait() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func TestElector_NoLease_CreatesItAndLeadsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		a := startReplica(t, store, leaders, testLeaderElection("a"), 0)
		synctest.Wait()
		if !a.leading() {
			t.Fatal("a does not lead right after creating the lease")
		}
		l, _ := store.get()
		now := metav1.NewMicroTime(time.Now())
		if holderOf(l) != "a" || *l.Spec.LeaseDurationSeconds != 15 || *l.Spec.LeaseTransitions != 0 ||
			!l.Spec.AcquireTime.Equal(&now) || !l.Spec.RenewTime.Equal(&now) {
			t.Errorf("lease spec = %+v, want holder a, 15s, 0 transitions, acquired and renewed now", l.Spec)
		}
		if err := a.stop(); err != nil {
			t.Errorf("run = %v, want nil", err)
		}
	})
}

func TestElector_Leading_RenewsEveryRetryPeriodKeepingAcquireTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		a := startReplica(t, store, leaders, testLeaderElection("a"), 0)
		synctest.Wait()
		first, _ := store.get()
		for i := 1; i <= 5; i++ {
			time.Sleep(2 * time.Second)
			synctest.Wait()
			l, writes := store.get()
			if writes != 1+i || !l.Spec.RenewTime.Time.Equal(first.Spec.RenewTime.Add(time.Duration(i)*2*time.Second)) ||
				!l.Spec.AcquireTime.Equal(first.Spec.AcquireTime) || *l.Spec.LeaseTransitions != 0 {
				t.Fatalf("after %ds: %d writes, spec %+v; want %d writes, renewTime +%ds, acquireTime and transitions unchanged",
					2*i, writes, l.Spec, 1+i, 2*i)
			}
		}
		a.stop()
	})
}

func TestElector_LeaseHeldByAnother_TakenOnlyAfterLeaseDurationOnLocalClock(t *testing.T) {
	// The remote renewTime says nothing: only how long this replica has seen
	// the record unchanged counts.
	for _, tc := range []struct {
		name  string
		renew func() *metav1.MicroTime
	}{
		{"renewTime far in the future", func() *metav1.MicroTime { return new(metav1.NewMicroTime(time.Now().AddDate(100, 0, 0))) }},
		{"renewTime far in the past", func() *metav1.MicroTime { return new(metav1.NewMicroTime(time.Now().AddDate(-30, 0, 0))) }},
		{"renewTime now", func() *metav1.MicroTime { return new(metav1.NewMicroTime(time.Now())) }},
		{"no renewTime", func() *metav1.MicroTime { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, leaders := &memLeases{}, &atomic.Int32{}
				store.put(coordinationv1.LeaseSpec{HolderIdentity: new("other"), LeaseDurationSeconds: new(int32(15)), RenewTime: tc.renew(), LeaseTransitions: new(int32(4))})
				start := time.Now()
				a := startReplica(t, store, leaders, testLeaderElection("a"), 0)
				time.Sleep(15 * time.Second)
				synctest.Wait()
				if a.leading() {
					t.Fatalf("a leads %v after first seeing another holder's lease of 15s", time.Since(start))
				}
				took := bubbleWaitUntil(t, 3*time.Second, "a leads", a.leading) + 15*time.Second
				if limit := 15*time.Second + 2400*time.Millisecond; took > limit {
					t.Errorf("a took the expired lease after %v, want at most %v (LeaseDuration + 1.2 RetryPeriod)", took, limit)
				}
				l, _ := store.get()
				if holderOf(l) != "a" || *l.Spec.LeaseTransitions != 5 {
					t.Errorf("lease holder %q, transitions %d; want a, 5", holderOf(l), *l.Spec.LeaseTransitions)
				}
				if !strings.Contains(a.logs.String(), "took over the lease after it expired") {
					t.Errorf("no log line for the take-over:\n%s", a.logs.String())
				}
				a.stop()
			})
		})
	}
}

func TestElector_LeaseRenewedByAnotherWithSkewedClock_NeverTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		renew := time.Now().AddDate(-5, 0, 0) // the holder's clock is 5 years slow
		store.put(coordinationv1.LeaseSpec{HolderIdentity: new("other"), LeaseDurationSeconds: new(int32(15)), RenewTime: new(metav1.NewMicroTime(renew))})
		a := startReplica(t, store, leaders, testLeaderElection("a"), 0)
		for range 60 { // 5 minutes
			time.Sleep(5 * time.Second)
			renew = renew.Add(5 * time.Second)
			store.put(coordinationv1.LeaseSpec{HolderIdentity: new("other"), LeaseDurationSeconds: new(int32(15)), RenewTime: new(metav1.NewMicroTime(renew))})
			if synctest.Wait(); a.leading() {
				t.Fatal("a took a lease that its holder renews")
			}
		}
		if logs := a.logs.String(); !strings.Contains(logs, `msg="leader election: new leader observed"`) || !strings.Contains(logs, "leader=other") {
			t.Errorf("no log line for the observed leader:\n%s", a.logs.String())
		}
		a.stop()
	})
}

func TestElector_Shutdown_RenewsUntilLeadReturnsThenReleasesToStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		a := startReplica(t, store, leaders, testLeaderElection("a"), 20*time.Second) // drains longer than LeaseDuration
		synctest.Wait()
		b := startReplica(t, store, leaders, testLeaderElection("b"), 0)
		time.Sleep(5 * time.Second)
		stopped := make(chan error, 1)
		go func() { stopped <- a.stop() }()
		for range 9 { // during the drain the lease stays a's and renewed
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if l, _ := store.get(); holderOf(l) != "a" || time.Since(l.Spec.RenewTime.Time) > 2*time.Second || b.leading() {
				t.Fatalf("%v into a's drain: lease holder %q renewed %v ago, b leading %v; want a's, renewed, b waiting",
					time.Since(a.termList()[0].cancelled), holderOf(l), time.Since(l.Spec.RenewTime.Time), b.leading())
			}
		}
		if err := <-stopped; err != nil {
			t.Errorf("a's run = %v, want nil", err)
		}
		released := time.Now()
		if got := a.termList()[0].end; !got.Equal(released) {
			t.Errorf("a's lead returned at %v, run returned at %v", got, released)
		}
		if l, _ := store.get(); holderOf(l) != "" || *l.Spec.LeaseDurationSeconds != 1 {
			t.Errorf("released lease: holder %q, duration %d; want empty holder, 1s", holderOf(l), *l.Spec.LeaseDurationSeconds)
		}
		if took := bubbleWaitUntil(t, 3*time.Second, "b leads", b.leading); took > 2400*time.Millisecond {
			t.Errorf("b led %v after the release, want within 1.2 RetryPeriods", took)
		}
		if !strings.Contains(a.logs.String(), "released the lease") {
			t.Errorf("no log line for the release:\n%s", a.logs.String())
		}
		b.stop()
	})
}

func TestElector_KeepOnShutdown_StandbyWaitsLeaseDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		cfg := testLeaderElection("a")
		cfg.KeepOnShutdown = true
		a := startReplica(t, store, leaders, cfg, 0)
		synctest.Wait()
		b := startReplica(t, store, leaders, testLeaderElection("b"), 0)
		time.Sleep(time.Second)
		if err := a.stop(); err != nil {
			t.Errorf("a's run = %v, want nil", err)
		}
		l, _ := store.get()
		lastWrite := time.Now().Add(-time.Second) // a renewed it when acquiring, 1s ago, not since
		if holderOf(l) != "a" {
			t.Fatalf("lease holder %q after shutdown with KeepOnShutdown, want a", holderOf(l))
		}
		bubbleWaitUntil(t, 20*time.Second, "b leads", b.leading)
		// b first saw a's last write at its first attempt, 0 to 2.4s after it.
		if took := time.Since(lastWrite); took <= 15*time.Second || took > 15*time.Second+5*time.Second {
			t.Errorf("b led %v after a's last write, want after 15s and within 1.2 + 1.2 RetryPeriods more", took)
		}
		b.stop()
	})
}

func TestElector_Recampaign_LeadsAgainAfterLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		cfg := testLeaderElection("a")
		cfg.Recampaign = true
		a := startReplica(t, store, leaders, cfg, 0)
		synctest.Wait()
		store.put(coordinationv1.LeaseSpec{HolderIdentity: new("intruder"), LeaseDurationSeconds: new(int32(15)), LeaseTransitions: new(int32(1))})
		bubbleWaitUntil(t, 3*time.Second, "a stops leading", func() bool { return !a.leading() })
		bubbleWaitUntil(t, 20*time.Second, "a leads again", a.leading)
		terms := a.termList()
		if len(terms) != 2 || terms[1].start.Sub(terms[0].cancelled) <= 15*time.Second {
			t.Errorf("terms %+v: want a second term once intruder's lease expired (>15s)", terms)
		}
		if !strings.Contains(a.logs.String(), `then="campaigning again (Recampaign)"`) {
			t.Errorf("the loss's log line does not say what follows:\n%s", a.logs.String())
		}
		if err := a.stop(); err != nil {
			t.Errorf("run = %v after a recampaign and shutdown, want nil", err)
		}
		if l, _ := store.get(); holderOf(l) != "" || *l.Spec.LeaseTransitions != 2 {
			t.Errorf("lease holder %q, transitions %d; want released, 2", holderOf(l), *l.Spec.LeaseTransitions)
		}
	})
}

func TestElector_LeadReturnsOnItsOwn_ReleasesAndRunReturnsNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memLeases{}
		cfg, _ := testLeaderElection("a").complete()
		e := newElectorFor(store, cfg, slog.New(slog.DiscardHandler), nil)
		if err := e.run(context.Background(), func(context.Context, context.Context) { time.Sleep(3 * time.Second) }); err != nil {
			t.Errorf("run = %v, want nil", err)
		}
		if l, _ := store.get(); holderOf(l) != "" {
			t.Errorf("lease holder %q, want released", holderOf(l))
		}
	})
}

func TestLeaderElection_Complete_FillsDefaultsAndRejectsBadDurations(t *testing.T) {
	nsFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(nsFile, []byte("pod-ns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := namespaceFile
	t.Cleanup(func() { namespaceFile = old })

	namespaceFile = nsFile
	got, err := LeaderElection{Name: "x"}.complete()
	if err != nil || got.Namespace != "pod-ns" || got.LeaseDuration != 15*time.Second || got.RenewDeadline != 10*time.Second || got.RetryPeriod != 2*time.Second {
		t.Errorf("complete() = %+v, %v; want namespace pod-ns from the file and durations 15s, 10s, 2s", got, err)
	}
	host, _ := os.Hostname()
	other, _ := LeaderElection{Name: "x"}.complete()
	if !strings.HasPrefix(got.Identity, host+"-") || len(got.Identity) != len(host)+9 || got.Identity == other.Identity {
		t.Errorf("identities %q and %q, want distinct %q plus '-' and 8 random characters", got.Identity, other.Identity, host)
	}

	namespaceFile = filepath.Join(t.TempDir(), "absent")
	for _, tc := range []struct {
		cfg  LeaderElection
		want string // "" for no error
	}{
		{LeaderElection{Name: "x", Namespace: "ns"}, ""},
		{LeaderElection{Name: "x", Namespace: "ns", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}, ""},
		{LeaderElection{Namespace: "ns"}, "LeaderElection.Name is empty"},
		{LeaderElection{Name: "x"}, `kctl: leader election: set LeaderElection.Namespace for lease "x": not running in a cluster`},
		{LeaderElection{Name: "x", Namespace: "ns", LeaseDuration: 10 * time.Second}, "lease ns/x: LeaseDuration (10s) must be greater than RenewDeadline (10s)"},
		{LeaderElection{Name: "x", Namespace: "ns", RetryPeriod: 9 * time.Second}, "RenewDeadline (10s) must be greater than 1.2 × RetryPeriod (9s)"},
		{LeaderElection{Name: "x", Namespace: "ns", LeaseDuration: 500 * time.Millisecond, RenewDeadline: 300 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}, "LeaseDuration at least 1s"},
		{LeaderElection{Name: "x", Namespace: "ns", RetryPeriod: -time.Second}, "durations must be positive"},
	} {
		_, err := tc.cfg.complete()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.complete() error = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/election"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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
		r.err = r.e.Run(ctx, r.lead(t))
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
		if election.Holder(l) != "a" || *l.Spec.LeaseDurationSeconds != 15 || *l.Spec.LeaseTransitions != 0 ||
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
				if election.Holder(l) != "a" || *l.Spec.LeaseTransitions != 5 {
					t.Errorf("lease holder %q, transitions %d; want a, 5", election.Holder(l), *l.Spec.LeaseTransitions)
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
			if l, _ := store.get(); election.Holder(l) != "a" || time.Since(l.Spec.RenewTime.Time) > 2*time.Second || b.leading() {
				t.Fatalf("%v into a's drain: lease holder %q renewed %v ago, b leading %v; want a's, renewed, b waiting",
					time.Since(a.termList()[0].cancelled), election.Holder(l), time.Since(l.Spec.RenewTime.Time), b.leading())
			}
		}
		if err := <-stopped; err != nil {
			t.Errorf("a's run = %v, want nil", err)
		}
		released := time.Now()
		if got := a.termList()[0].end; !got.Equal(released) {
			t.Errorf("a's lead returned at %v, run returned at %v", got, released)
		}
		if l, _ := store.get(); election.Holder(l) != "" || *l.Spec.LeaseDurationSeconds != 1 {
			t.Errorf("released lease: holder %q, duration %d; want empty holder, 1s", election.Holder(l), *l.Spec.LeaseDurationSeconds)
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
		if election.Holder(l) != "a" {
			t.Fatalf("lease holder %q after shutdown with KeepOnShutdown, want a", election.Holder(l))
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
		if l, _ := store.get(); election.Holder(l) != "" || *l.Spec.LeaseTransitions != 2 {
			t.Errorf("lease holder %q, transitions %d; want released, 2", election.Holder(l), *l.Spec.LeaseTransitions)
		}
	})
}

func TestElector_LeadReturnsOnItsOwn_ReleasesAndRunReturnsNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memLeases{}
		cfg, _ := testLeaderElection("a").complete()
		e := newElectorFor(store, cfg, slog.New(slog.DiscardHandler), nil)
		if err := e.Run(context.Background(), func(context.Context, context.Context) { time.Sleep(3 * time.Second) }); err != nil {
			t.Errorf("run = %v, want nil", err)
		}
		if l, _ := store.get(); election.Holder(l) != "" {
			t.Errorf("lease holder %q, want released", election.Holder(l))
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

// managerReplica is one Manager with leader election and one controller
// that reconciles ConfigMaps of its namespace without pause.
type managerReplica struct {
	id         string
	m          *Manager
	cancel     context.CancelFunc
	done       chan struct{}
	err        error
	reconciles atomic.Int64
	logs       *logBuffer
	leases     *faultyLeases // the elector's lease store, to inject faults
	slow       atomic.Bool   // reconciles run until their context ends
	blocked    atomic.Int32  // slow reconciles begun
}

// startElectedManager starts a Manager whose reconciles count themselves in active
// (never more than one at a time across Managers: one key, one worker each).
func startElectedManager(t *testing.T, cfg *rest.Config, le LeaderElection, active *atomic.Int32) *managerReplica {
	t.Helper()
	r := &managerReplica{id: le.Identity, done: make(chan struct{}), logs: &logBuffer{}}
	var err error
	r.m, err = NewManager(Options{Config: cfg, ShutdownTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
		Cache:  CacheOptions{DefaultScope: Scope{Namespaces: []string{le.Namespace}}}})
	if err != nil {
		t.Fatal(err)
	}
	r.leases = &faultyLeases{leaseStore: NewClient[coordinationv1.Lease](r.m.conn)}
	if err := r.m.electLeader(le, r.leases, "ElectLeader"); err != nil {
		t.Fatal(err)
	}
	NewController(r.m, "leader-test", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		if n := active.Add(1); n > 1 {
			t.Errorf("%s reconciles while another Manager does (%d at once)", r.id, n)
		}
		defer active.Add(-1)
		r.reconciles.Add(1)
		d := 20 * time.Millisecond
		if r.slow.Load() {
			r.blocked.Add(1)
			d = time.Hour
		}
		select { // work that stops when its context ends
		case <-ctx.Done():
		case <-time.After(d):
		}
		return Result{RequeueAfter: time.Millisecond}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = r.m.Start(ctx)
	}()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("logs of manager %s:\n%s", r.id, r.logs.String())
		}
	})
	return r
}

func (r *managerReplica) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// leaderMetric is the manager's leader_election_master_status line.
func (r *managerReplica) leaderMetric() string {
	rec := httptest.NewRecorder()
	r.m.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "leader_election_master_status{") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// pollReconciler waits until one of ms reconciles (more than before) and returns it.
func pollReconciler(t *testing.T, ms []*managerReplica, limit time.Duration) *managerReplica {
	t.Helper()
	before := make([]int64, len(ms))
	for i, m := range ms {
		before[i] = m.reconciles.Load()
	}
	var got *managerReplica
	pollWithin(t, limit, "a Manager reconciles", func() bool {
		for i, m := range ms {
			if m.reconciles.Load() > before[i] {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

func TestManager_LeaderElection_OnlyLeaderReconcilesAndReleaseHandsOver(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d managers", n), func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}
			if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			active := &atomic.Int32{}
			sampleLeaders(t, active)
			var live []*managerReplica
			for i := range n {
				live = append(live, startElectedManager(t, cfg, apiLeaderElection(ns, fmt.Sprintf("m%d", i)), active))
			}
			leader := pollReconciler(t, live, 20*time.Second)
			for len(live) > 1 {
				pollRenewals(t, leader.leases, 2) // reconciles go on; the standbys poll
				for _, m := range live {
					want := `leader_election_master_status{name="leader-test"} 0`
					if m == leader {
						want = `leader_election_master_status{name="leader-test"} 1`
					}
					if got := m.leaderMetric(); got != want {
						t.Errorf("manager %s: %q, want %q", m.id, got, want)
					}
				}
				cancelled := time.Now()
				if err := leader.stop(); err != nil {
					t.Fatalf("manager %s: Start = %v, want nil", leader.id, err)
				}
				released := leader.leases.lastWriteSent() // the release
				live = slices.DeleteFunc(live, func(m *managerReplica) bool { return m == leader })
				next := pollReconciler(t, live, 5*time.Second)
				took := time.Since(released)
				t.Logf("hand-over %s -> %s on shutdown: first reconcile %v after the release was sent (%v after cancel)",
					leader.id, next.id, took.Round(time.Millisecond), time.Since(cancelled).Round(time.Millisecond))
				// A standby takes a released lease at its next attempt;
				// without the release it would wait LeaseDuration from the
				// last renewal, which is the bound.
				if le := apiLeaderElection(ns, ""); took >= le.LeaseDuration {
					t.Errorf("hand-over took %v after the release, want less than LeaseDuration (%v): the standby took the lease as expired, not as released", took, le.LeaseDuration)
				}
				leader = next
			}
		})
	}
}

func TestManager_LeaderElection_KeepOnShutdown_StandbyReconcilesAfterLeaseDuration(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}
	if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	active := &atomic.Int32{}
	sampleLeaders(t, active)
	le := apiLeaderElection(ns, "m0")
	le.KeepOnShutdown = true
	a := startElectedManager(t, cfg, le, active)
	pollReconciler(t, []*managerReplica{a}, 20*time.Second)
	b := startElectedManager(t, cfg, apiLeaderElection(ns, "m1"), active)
	pollRenewals(t, a.leases, 3)
	if b.reconciles.Load() != 0 {
		t.Fatal("the standby reconciled")
	}
	cancelled := time.Now()
	if err := a.stop(); err != nil {
		t.Fatalf("Start = %v, want nil", err)
	}
	pollReconciler(t, []*managerReplica{b}, 8*time.Second)
	took := time.Since(cancelled)
	t.Logf("hand-over m0 -> m1 without release: first reconcile %v after cancel", took.Round(time.Millisecond))
	if took < 3*time.Second-600*time.Millisecond {
		t.Errorf("the standby reconciled %v after the leader stopped, want about LeaseDuration (3s)", took)
	}
}

func TestManager_LeaderElection_RenewalsFail_LeaderStopsReconcilingBeforeStandbyStarts(t *testing.T) {
	for _, recampaign := range []bool{false, true} {
		t.Run(fmt.Sprintf("Recampaign=%v", recampaign), func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}
			if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			active := &atomic.Int32{}
			sampleLeaders(t, active)
			le := apiLeaderElection(ns, "m0")
			le.Recampaign = recampaign
			a := startElectedManager(t, cfg, le, active)
			pollReconciler(t, []*managerReplica{a}, 20*time.Second)
			b := startElectedManager(t, cfg, apiLeaderElection(ns, "m1"), active)
			pollRenewals(t, a.leases, 3)

			a.leases.setFault(failUpdates)
			pollReconciler(t, []*managerReplica{b}, 8*time.Second)
			took := time.Since(a.leases.lastWriteSent())
			t.Logf("hand-over m0 -> m1 after m0's renewals failed: first reconcile %v after m0's last renewal was sent", took.Round(time.Millisecond))
			if took < 3*time.Second {
				t.Errorf("the standby reconciled %v after the leader's last renewal, want after LeaseDuration (3s)", took)
			}
			if !strings.Contains(a.logs.String(), "lost the lease; leader work cancelled") {
				t.Errorf("no log line for the loss")
			}
			if !recampaign {
				select {
				case <-a.done:
				case <-time.After(5 * time.Second):
					t.Fatal("Start has not returned after the loss")
				}
				if !errors.Is(a.err, ErrLeaderLost) {
					t.Errorf("Start = %v, want ErrLeaderLost", a.err)
				}
				return
			}
			a.leases.setFault(nil) // m0 campaigns again, and leads once m1 hands back
			if err := b.stop(); err != nil {
				t.Fatalf("m1: Start = %v, want nil", err)
			}
			pollReconciler(t, []*managerReplica{a}, 5*time.Second)
		})
	}
}

func TestManager_LeaderElection_RenewalsFailDuringShutdownDrain_DrainStopsBeforeStandbyStarts(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}
	if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	active := &atomic.Int32{}
	sampleLeaders(t, active)
	a := startElectedManager(t, cfg, apiLeaderElection(ns, "m0"), active) // ShutdownTimeout 5s > LeaseDuration
	pollReconciler(t, []*managerReplica{a}, 20*time.Second)
	b := startElectedManager(t, cfg, apiLeaderElection(ns, "m1"), active)
	a.slow.Store(true)
	pollWithin(t, 5*time.Second, "a slow reconcile is in flight", func() bool { return a.blocked.Load() > 0 })
	pollRenewals(t, a.leases, 3) // the standby has seen renewals

	a.leases.setFault(failUpdates) // the drain outlives the lease unless it stops at RenewDeadline
	a.cancel()
	pollReconciler(t, []*managerReplica{b}, 8*time.Second)
	t.Logf("hand-over m0 -> m1 (renewals failing during m0's drain): first reconcile %v after m0's last renewal was sent",
		time.Since(a.leases.lastWriteSent()).Round(time.Millisecond))
	if err := a.stop(); !errors.Is(err, ErrLeaderLost) {
		t.Errorf("m0: Start = %v, want ErrLeaderLost (lost during the drain)", err)
	}
}

// Issue 33, item 6: a member that loses its Lease says so. Whatever the
// cause (the connection goes silent, the update is refused, another
// holder writes the Lease), Manager.Start returns an error matching
// ErrLeaderLost, so that a supervisor that restarts only on failure
// restarts the replica; only the caller's own context ending is clean.

// leaderTerm is a leader-only runnable that records its term: when it
// began and when (and why) its context ended.
type leaderTerm struct {
	began chan struct{}
	ended chan struct{}
	at    atomic.Pointer[time.Time] // when its context ended
	cause error                     // its context's cause; read after ended
}

func addLeaderTerm(t *testing.T, m *Manager) *leaderTerm {
	t.Helper()
	lt := &leaderTerm{began: make(chan struct{}), ended: make(chan struct{})}
	err := m.Add(Runnable{Name: "term", NeedLeader: true, Run: func(ctx context.Context) error {
		close(lt.began) // one term: a second would panic
		<-ctx.Done()
		now := time.Now()
		lt.at.Store(&now)
		lt.cause = context.Cause(ctx)
		close(lt.ended)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return lt
}

// startRecorded runs m.Start(ctx) and returns a channel that receives
// what it returned, and when.
func startRecorded(ctx context.Context, m *Manager) <-chan startResult {
	done := make(chan startResult, 1)
	go func() {
		err := m.Start(ctx)
		done <- startResult{err: err, at: time.Now()}
	}()
	return done
}

type startResult struct {
	err error
	at  time.Time
}

// waitStart waits for Start's result, failing after limit.
func waitStart(t *testing.T, done <-chan startResult, limit time.Duration) startResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
		t.Fatalf("Start has not returned %v after the loss began", limit)
		return startResult{}
	}
}

// waitClosed waits for ch to close, failing after limit.
func waitClosed(t *testing.T, ch <-chan struct{}, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(limit):
		t.Fatalf("%s: not within %v", what, limit)
	}
}

// A leader whose connection to the API server goes silent (fault
// injection: a proxy that stops forwarding, its connections left open)
// stops its leader work RenewDeadline after its last renewal, before the
// Lease expires for a standby, and Start returns ErrLeaderLost.
func TestManager_ElectLeader_SilentNetwork_StartReturnsErrLeaderLost(t *testing.T) {
	direct := testConfig(t)
	ns := testNamespace(t, direct)
	hole, cfg := newBlackhole(t, direct)
	m := testManager(t, cfg, ns, Options{ShutdownTimeout: 5 * time.Second})
	le := apiLeaderElection(ns, "a")
	if err := m.ElectLeader(le); err != nil {
		t.Fatal(err)
	}
	lt := addLeaderTerm(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startRecorded(ctx, m)
	waitClosed(t, lt.began, 20*time.Second, "a leads")
	leases := NewClient[coordinationv1.Lease](connFor(t, direct))
	before := leaseRenewTime(t, leases, ns, le.Name)
	pollWithin(t, 5*time.Second, "a renews", func() bool {
		return leaseRenewTime(t, leases, ns, le.Name).After(before)
	})

	silenced := time.Now()
	hole.silence()
	waitClosed(t, lt.ended, 3*le.LeaseDuration, "the leader work stops")
	r := waitStart(t, done, 3*le.LeaseDuration)
	stopped := lt.at.Load().Sub(silenced)
	returned := r.at.Sub(silenced)
	t.Logf("silent network: leader work stopped %v after the silence began, Start returned after %v "+
		"(RenewDeadline %v, LeaseDuration %v): %v", stopped.Round(time.Millisecond),
		returned.Round(time.Millisecond), le.RenewDeadline, le.LeaseDuration, r.err)
	if r.err == nil {
		t.Fatalf("Start returned nil, want an error matching ErrLeaderLost")
	}
	if !errors.Is(r.err, ErrLeaderLost) {
		t.Errorf("Start = %v, want an error matching ErrLeaderLost", r.err)
	}
	if !errors.Is(lt.cause, ErrLeaderLost) {
		t.Errorf("the leader work's context ended with %v, want ErrLeaderLost", lt.cause)
	}
	// The last renewal the server wrote was sent before the silence; a
	// standby judges the Lease expired LeaseDuration after it saw it.
	if stopped >= le.LeaseDuration {
		t.Errorf("the leader work stopped %v after the silence began, want before LeaseDuration (%v)", stopped, le.LeaseDuration)
	}
}

// A leader whose Lease update is refused stops at its next renewal, and
// Start returns ErrLeaderLost: when its RBAC grant is withdrawn (the
// answer is Forbidden, and the error still says so), or when another
// identity wrote the Lease.
func TestManager_ElectLeader_UpdateRefused_StartReturnsErrLeaderLost(t *testing.T) {
	for _, how := range []string{"RoleBinding removed", "another holder wrote the Lease"} {
		t.Run(how, func(t *testing.T) {
			admin := testConfig(t)
			ns := testNamespace(t, admin)
			cfg := testUnprivilegedConfig(t)
			grantLeases(t, admin, ns, `"get","create","update"`)
			leases := NewClient[coordinationv1.Lease](connFor(t, cfg))
			pollWithin(t, 10*time.Second, "the grant takes effect", func() bool {
				_, err := leases.Get(t.Context(), ns, "leader-test")
				return !apierrors.IsForbidden(err)
			})
			m := testManager(t, cfg, ns, Options{ShutdownTimeout: 5 * time.Second})
			le := apiLeaderElection(ns, "a")
			if err := m.ElectLeader(le); err != nil {
				t.Fatal(err)
			}
			lt := addLeaderTerm(t, m)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := startRecorded(ctx, m)
			waitClosed(t, lt.began, 20*time.Second, "a leads")

			refused := time.Now()
			if how == "RoleBinding removed" {
				path := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/rolebindings/leases"
				if code, resp := testRawRequest(t, admin, "DELETE", path, ""); code != http.StatusOK {
					t.Fatalf("DELETE %s: %d %s", path, code, resp)
				}
			} else {
				writeLeaseHolder(t, NewClient[coordinationv1.Lease](connFor(t, admin)), ns, le.Name, "intruder")
			}
			r := waitStart(t, done, 3*le.LeaseDuration)
			t.Logf("%s: Start returned %v after the refusal began (RetryPeriod %v): %v",
				how, r.at.Sub(refused).Round(time.Millisecond), le.RetryPeriod, r.err)
			if r.err == nil {
				t.Fatalf("Start returned nil, want an error matching ErrLeaderLost")
			}
			if !errors.Is(r.err, ErrLeaderLost) {
				t.Errorf("Start = %v, want an error matching ErrLeaderLost", r.err)
			}
			if how == "RoleBinding removed" && !apierrors.IsForbidden(r.err) {
				t.Errorf("Start = %v, want it to wrap the Forbidden answer", r.err)
			}
			if !errors.Is(lt.cause, ErrLeaderLost) {
				t.Errorf("the leader work's context ended with %v, want ErrLeaderLost", lt.cause)
			}
		})
	}
}

// leaseRenewTime is the renewTime of Lease ns/name (zero if none).
func leaseRenewTime(t *testing.T, leases *Client[coordinationv1.Lease], ns, name string) time.Time {
	t.Helper()
	l, err := leases.Get(t.Context(), ns, name)
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// writeLeaseHolder makes holder the holder of Lease ns/name, as another
// replica taking it would.
func writeLeaseHolder(t *testing.T, leases *Client[coordinationv1.Lease], ns, name, holder string) {
	t.Helper()
	for {
		l, err := leases.Get(t.Context(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.NowMicro()
		l.Spec.HolderIdentity = &holder
		l.Spec.RenewTime = &now
		err = leases.Update(t.Context(), l)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) { // a renewal came between: read again
			t.Fatal(err)
		}
	}
}

// A shard member whose connection to the API server goes silent (fault
// injection, as above) cancels its in-flight reconcile before its Lease
// expires for its peers, and Start returns ErrLeaderLost (it returned
// nil: the cause wrapped the renewal's context.DeadlineExceeded).
func TestShardMember_SilentNetwork_StartReturnsErrLeaderLost(t *testing.T) {
	direct := testConfig(t)
	ns := testNamespace(t, direct)
	hole, cfg := newBlackhole(t, direct)
	m := testManager(t, cfg, ns, Options{ShutdownTimeout: 5 * time.Second})
	started := make(chan struct{}, 1)
	var cancelledAt atomic.Pointer[time.Time]
	var cause atomic.Pointer[error]
	NewController(m, "stuck", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		now := time.Now()
		err := context.Cause(ctx)
		cause.Store(&err)
		cancelledAt.Store(&now)
		return Result{}, ctx.Err()
	})
	lease := 2 * time.Second
	opts := ShardOptions{Group: "silent", Namespace: ns, Identity: "m-0", Ranges: 8,
		LeaseDuration: lease, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 1200 * time.Millisecond}
	run, err := m.shard(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startRecorded(ctx, m)
	member := &shardMember{id: "m-0", run: run}
	eventually(t, "m-0 serves every range", func() bool {
		return member.serves([]string{"m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0"})
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	if err := NewClient[corev1.ConfigMap](connFor(t, direct)).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile started 30s after the ConfigMap was made")
	}

	// The silence begins between the member's last peek (every
	// RenewPeriod/4 after a look) and its next look: the look's list then
	// hangs until the renewal deadline, and its renewal fails with
	// context.DeadlineExceeded, the cause Start took for a clean stop. (A
	// silence during a peek makes the member lose its Lease by its timer,
	// a cause that never wrapped it.) The wait picks when to inject the
	// fault; it synchronises nothing.
	renewed := leaseRenewed(t, NewClient[coordinationv1.Lease](connFor(t, direct)), ns, opts.leaseName())
	time.Sleep(time.Until(renewed.Add(opts.RenewPeriod * 7 / 8)))
	silenced := time.Now()
	hole.silence()
	r := waitStart(t, done, 10*lease)
	at := cancelledAt.Load()
	if at == nil {
		t.Fatalf("Start returned (%v) while the reconcile still runs", r.err)
	}
	// The last renewal, written before renewed: its peers judge the Lease
	// expired no sooner than LeaseDuration after that write.
	stopped := at.Sub(renewed)
	t.Logf("silent network: the member's reconcile was cancelled %v after its last renewal was seen (%v after the silence began), "+
		"Start returned %v after the silence began (RenewDeadline %v, LeaseDuration %v): %v", stopped.Round(time.Millisecond),
		at.Sub(silenced).Round(time.Millisecond), r.at.Sub(silenced).Round(time.Millisecond), opts.RenewDeadline, lease, r.err)
	if r.err == nil {
		t.Fatalf("Start returned nil, want an error matching ErrLeaderLost")
	}
	if !errors.Is(r.err, ErrLeaderLost) {
		t.Errorf("Start = %v, want an error matching ErrLeaderLost", r.err)
	}
	if c := *cause.Load(); !errors.Is(c, ErrLeaderLost) {
		t.Errorf("the reconcile's context ended with %v, want ErrLeaderLost", c)
	}
	if stopped >= lease {
		t.Errorf("the reconcile was cancelled %v after the last renewal, want before LeaseDuration (%v)", stopped, lease)
	}
}

// leaseRenewed waits until Lease ns/name changes and returns when it saw
// the change (within 5 ms and a request of the write).
func leaseRenewed(t *testing.T, leases *Client[coordinationv1.Lease], ns, name string) time.Time {
	t.Helper()
	version := func() string {
		l, err := leases.Get(t.Context(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return l.ResourceVersion
	}
	was := version()
	pollWithin(t, time.Minute, "a renewal of Lease "+name, func() bool { return version() != was })
	return time.Now()
}

// The caller's own context ending is a clean stop, whatever its cause
// (past its deadline, cancelled with a cause of the caller's): Start
// returns nil.
func TestManager_CallerContextEnds_StartReturnsNil(t *testing.T) {
	for _, how := range []string{"deadline", "cancelled with a cause"} {
		t.Run(how, func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			m := testManager(t, cfg, ns, Options{})
			if err := m.ElectLeader(apiLeaderElection(ns, "a")); err != nil {
				t.Fatal(err)
			}
			lt := addLeaderTerm(t, m)
			var ctx context.Context
			var stop func()
			if how == "deadline" {
				deadline, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				ctx = deadline
				stop = func() { <-deadline.Done() }
			} else {
				cancelled, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				ctx = cancelled
				stop = func() { cancel(errors.New("stopped by the test")) }
			}
			done := startRecorded(ctx, m)
			select { // a deadline may come first on a slow machine: a clean stop as well
			case <-lt.began:
			case <-ctx.Done():
			}
			stop()
			if r := waitStart(t, done, 30*time.Second); r.err != nil {
				t.Errorf("Start = %v after its caller's context ended, want nil", r.err)
			}
		})
	}
}

// A leader-only runnable that fails with a timeout stops the Manager, and
// Start returns its error: the Manager's own stop is an error whatever its
// cause wraps (Start returned nil for a cause wrapping DeadlineExceeded).
func TestManager_LeaderOnlyRunnableTimesOut_StartReturnsItsError(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	m := testManager(t, cfg, ns, Options{})
	timedOut := fmt.Errorf("calling the payment service: %w", context.DeadlineExceeded)
	err := m.Add(Runnable{Name: "payments", NeedLeader: true, Run: func(ctx context.Context) error {
		return timedOut
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := waitStart(t, startRecorded(ctx, m), 30*time.Second)
	if !errors.Is(r.err, timedOut) {
		t.Errorf("Start = %v, want the runnable's error %q", r.err, timedOut)
	}
}

// Integration tests: the real API server, real time, short durations.

// apiLeaderElection is the configuration of the integration tests.
func apiLeaderElection(namespace, id string) LeaderElection {
	return LeaderElection{Name: "leader-test", Namespace: namespace, Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
}

func connFor(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// sampleLeaders checks, every millisecond until the test ends, that at most
// one replica leads; call it before starting the replicas so that it
// samples until they have stopped.
func sampleLeaders(t *testing.T, leaders *atomic.Int32) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	samples := 0
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			samples++
			if n := leaders.Load(); n > 1 {
				t.Errorf("sample %d at %v: %d leaders at once", samples, time.Now().Format(time.StampMicro), n)
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		t.Logf("%d samples of the number of leaders", samples)
	})
}

// pollWithin polls cond every 5ms until it holds, failing after limit; it
// returns how long that took.
func pollWithin(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	return time.Since(start)
}

// pollLeader waits for one of rs to lead and returns it.
func pollLeader(t *testing.T, rs []*replica, limit time.Duration) *replica {
	t.Helper()
	var leader *replica
	pollWithin(t, limit, "a replica leads", func() bool {
		for _, r := range rs {
			if r.leading() {
				leader = r
				return true
			}
		}
		return false
	})
	return leader
}

func replicasWithout(rs []*replica, r *replica) []*replica {
	out := []*replica{}
	for _, x := range rs {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}

func TestElector_API_Replicas_OneLeadsAndReleaseHandsOverWithinRetryPeriod(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d replicas", n), func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			leases := NewClient[coordinationv1.Lease](connFor(t, cfg))
			leaders := &atomic.Int32{}
			sampleLeaders(t, leaders)
			var live []*replica
			for i := range n {
				live = append(live, startReplica(t, leases, leaders, apiLeaderElection(ns, fmt.Sprintf("r%d", i)), 0))
			}
			leader := pollLeader(t, live, 5*time.Second)
			for len(live) > 1 {
				pollRenewals(t, leader.store, 2) // the leader renews, the standbys poll
				if l, err := leases.Get(t.Context(), ns, "leader-test"); err != nil || election.Holder(l) != leader.id {
					t.Fatalf("lease holder %q (%v), want the leading replica %s", election.Holder(l), err, leader.id)
				}
				cancelled := time.Now()
				if err := leader.stop(); err != nil {
					t.Fatalf("%s's run = %v, want nil", leader.id, err)
				}
				released := leader.store.lastWriteSent() // the release
				live = replicasWithout(live, leader)
				next := pollLeader(t, live, 5*time.Second)
				took := next.termList()[0].start.Sub(released)
				t.Logf("hand-over %s -> %s on release: %v after the release was sent (%v after cancel)",
					leader.id, next.id, took.Round(time.Millisecond), time.Since(cancelled).Round(time.Millisecond))
				// A standby takes a released lease at its next attempt (1.2
				// RetryPeriods at most); without the release it would wait
				// LeaseDuration from the last renewal, which is the bound.
				if le := apiLeaderElection(ns, ""); took >= le.LeaseDuration {
					t.Errorf("hand-over took %v after the release, want less than LeaseDuration (%v): the standby took the lease as expired, not as released", took, le.LeaseDuration)
				}
				leader = next
			}
		})
	}
}

func TestElector_API_RenewalsStopWithoutRelease_StandbyLeadsAfterLeaseDuration(t *testing.T) {
	for _, how := range []string{"KeepOnShutdown", "renewals fail"} {
		t.Run(how, func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			leases := NewClient[coordinationv1.Lease](connFor(t, cfg))
			leaders := &atomic.Int32{}
			sampleLeaders(t, leaders)
			le := apiLeaderElection(ns, "a")
			le.KeepOnShutdown = how == "KeepOnShutdown"
			a := startReplica(t, leases, leaders, le, 0)
			pollLeader(t, []*replica{a}, 5*time.Second)
			standbys := []*replica{
				startReplica(t, leases, leaders, apiLeaderElection(ns, "b"), 0),
				startReplica(t, leases, leaders, apiLeaderElection(ns, "c"), 0),
			}
			pollRenewals(t, a.store, 2) // the standbys have seen a renewal

			if how == "KeepOnShutdown" {
				if err := a.stop(); err != nil {
					t.Fatalf("a's run = %v, want nil", err)
				}
			} else {
				a.store.setFault(failUpdates)
				a.waitDone(t, 5*time.Second)
				if !errors.Is(a.err, ErrLeaderLost) {
					t.Errorf("a's run = %v, want ErrLeaderLost", a.err)
				}
				// The elector counts RenewDeadline from when it began its last
				// successful renewal (the renewTime it wrote). It must stop
				// no sooner, and before a standby could judge the lease
				// expired: LeaseDuration after it saw the last renewal, sent
				// no sooner than lastWriteSent. No fixed slack for a loaded
				// machine: the margin is LeaseDuration - RenewDeadline.
				le := apiLeaderElection(ns, "a")
				stopped := a.termList()[0].cancelled
				if early := stopped.Sub(a.store.lastRenewBegun()); early < le.RenewDeadline {
					t.Errorf("a stopped leading %v after it began its last renewal, want RenewDeadline (%v)", early, le.RenewDeadline)
				}
				if late := stopped.Sub(a.store.lastWriteSent()); late >= le.LeaseDuration {
					t.Errorf("a stopped leading %v after its last renewal was sent, want before LeaseDuration (%v)", late, le.LeaseDuration)
				}
			}
			lastWrite := a.store.lastWriteSent()
			next := pollLeader(t, standbys, 8*time.Second)
			took := next.termList()[0].start.Sub(lastWrite)
			limit := 3*time.Second + 2*600*time.Millisecond + 500*time.Millisecond
			t.Logf("hand-over a -> %s without release: %v after a's last renewal was sent", next.id, took.Round(time.Millisecond))
			if took < 3*time.Second || took > limit {
				t.Errorf("%s led %v after a's last renewal, want after LeaseDuration (3s) and within %v", next.id, took, limit)
			}
		})
	}
}

func TestElector_API_Forbidden_RunReturnsErrorNamingLeaseAndRBAC(t *testing.T) {
	for _, tc := range []struct {
		grant  string // verbs granted on leases to the unprivileged user
		exists bool   // the lease exists, free
		verb   string // the verb that is refused
	}{{"", false, "get"}, {`"get"`, false, "create"}, {`"get","create"`, true, "update"}} {
		t.Run("refused "+tc.verb, func(t *testing.T) {
			admin := testConfig(t)
			ns := testNamespace(t, admin)
			unprivileged := testUnprivilegedConfig(t)
			leases := NewClient[coordinationv1.Lease](connFor(t, unprivileged))
			if tc.exists {
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader-test"}}
				if err := NewClient[coordinationv1.Lease](connFor(t, admin)).Create(t.Context(), l); err != nil {
					t.Fatal(err)
				}
			}
			if tc.grant != "" {
				grantLeases(t, admin, ns, tc.grant)
				pollWithin(t, 10*time.Second, "the grant takes effect", func() bool {
					_, err := leases.Get(t.Context(), ns, "leader-test")
					return !apierrors.IsForbidden(err)
				})
			}
			cfg, err := apiLeaderElection(ns, "a").complete()
			if err != nil {
				t.Fatal(err)
			}
			e := newElectorFor(leases, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), nil)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err = e.Run(ctx, func(context.Context, context.Context) { t.Error("lead was called") })
			want := "kctl: leader election: not allowed to " + tc.verb + " lease " + ns + "/leader-test: grant get, create, update on leases.coordination.k8s.io in namespace " + ns
			if err == nil || !strings.Contains(err.Error(), want) || !apierrors.IsForbidden(err) || ctx.Err() != nil {
				t.Errorf("run = %v, want at once an error containing %q", err, want)
			}
		})
	}
}

// grantLeases lets user kctl-unprivileged use verbs (JSON strings) on
// leases in namespace ns.
func grantLeases(t *testing.T, admin *rest.Config, ns, verbs string) {
	t.Helper()
	grantUnprivileged(t, admin, ns, "leases", `{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":[`+verbs+`]}`)
}

// faultyLeases passes requests to a leaseStore unless fault, given the verb
// ("get", "create", "update"), returns an error.
type faultyLeases struct {
	leaseStore
	mu        sync.Mutex
	fault     func(ctx context.Context, verb string) error
	lastWrite time.Time // when the last successful write was sent
	lastBegun time.Time // the renewTime the last successful update wrote
	writes    int       // successful writes
}

// wrote records a successful write sent at sent.
func (f *faultyLeases) wrote(sent time.Time, err error) error {
	if err == nil {
		f.mu.Lock()
		f.lastWrite = sent
		f.writes++
		f.mu.Unlock()
	}
	return err
}

// pollRenewals waits, in real time, until f has had n more successful writes.
func pollRenewals(t *testing.T, f *faultyLeases, n int) {
	t.Helper()
	count := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.writes }
	want := count() + n
	pollWithin(t, time.Duration(n+1)*time.Second, fmt.Sprintf("%d renewals", n), func() bool { return count() >= want })
}

// lastRenewBegun is the renewTime the last successful update wrote: the
// instant the elector began that renewal, from which it counts
// RenewDeadline (truncated to microseconds, so never later).
func (f *faultyLeases) lastRenewBegun() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastBegun
}

func (f *faultyLeases) lastWriteSent() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastWrite
}

func (f *faultyLeases) setFault(fn func(ctx context.Context, verb string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fn
}

func (f *faultyLeases) check(ctx context.Context, verb string) error {
	f.mu.Lock()
	fn := f.fault
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(ctx, verb)
}

func (f *faultyLeases) Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	if err := f.check(ctx, "get"); err != nil {
		return nil, err
	}
	return f.leaseStore.Get(ctx, namespace, name)
}

func (f *faultyLeases) Create(ctx context.Context, l *coordinationv1.Lease) error {
	if err := f.check(ctx, "create"); err != nil {
		return err
	}
	return f.wrote(time.Now(), f.leaseStore.Create(ctx, l))
}

func (f *faultyLeases) Update(ctx context.Context, l *coordinationv1.Lease) error {
	if err := f.check(ctx, "update"); err != nil {
		return err
	}
	err := f.wrote(time.Now(), f.leaseStore.Update(ctx, l))
	if err == nil && l.Spec.RenewTime != nil {
		f.mu.Lock()
		f.lastBegun = l.Spec.RenewTime.Time
		f.mu.Unlock()
	}
	return err
}

// failUpdates fails every update as an unreachable API server would.
func failUpdates(_ context.Context, verb string) error {
	if verb == "update" {
		return apierrors.NewServiceUnavailable("the API server is down")
	}
	return nil
}

// hangUpdates makes every update hang until its deadline.
func hangUpdates(ctx context.Context, verb string) error {
	if verb == "update" {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func TestElector_RenewalsFailDuringShutdownDrain_LeaseContextEndsBeforeStandbyTakesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		a := startReplica(t, store, leaders, testLeaderElection("a"), time.Minute) // drains longer than LeaseDuration
		synctest.Wait()
		b := startReplica(t, store, leaders, testLeaderElection("b"), 0)
		time.Sleep(3 * time.Second) // a renewed at 2s
		a.store.setFault(failUpdates)
		if err := a.stop(); !errors.Is(err, ErrLeaderLost) {
			t.Errorf("a's run = %v, want ErrLeaderLost: the lease was lost during the drain", err)
		}
		if term := a.termList()[0]; term.end.Sub(term.start) != 12*time.Second {
			t.Errorf("a's drain ended %v after its term began, want 12s (last renewal at 2s + RenewDeadline)", term.end.Sub(term.start))
		}
		bubbleWaitUntil(t, 10*time.Second, "b leads", b.leading)
	})
}

func TestElector_RenewalsFail_LeaderStopsAtRenewDeadlineBeforeStandbyTakesOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(context.Context, string) error
	}{{"updates fail", failUpdates}, {"updates hang", hangUpdates}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, leaders := &memLeases{}, &atomic.Int32{}
				a := startReplica(t, store, leaders, testLeaderElection("a"), 0)
				synctest.Wait()
				b := startReplica(t, store, leaders, testLeaderElection("b"), 0)
				time.Sleep(3 * time.Second) // a renewed at 2s
				a.store.setFault(tc.fault)
				a.waitDone(t, time.Minute)
				if !errors.Is(a.err, ErrLeaderLost) || !strings.Contains(a.err.Error(), "ns/lease") {
					t.Errorf("a's run = %v, want ErrLeaderLost naming ns/lease", a.err)
				}
				term := a.termList()[0]
				if lost := term.cancelled.Sub(term.start); lost != 12*time.Second {
					t.Errorf("a's leader context ended %v after it began, want 12s (last renewal at 2s + RenewDeadline)", lost)
				}
				if !errors.Is(term.cause, ErrLeaderLost) {
					t.Errorf("leader context cause = %v, want ErrLeaderLost", term.cause)
				}
				bubbleWaitUntil(t, 10*time.Second, "b leads", b.leading)
				if bStart := b.termList()[0].start; bStart.Sub(term.end) < 3*time.Second {
					t.Errorf("b began %v after a's work ended, want at least LeaseDuration - RenewDeadline = 5s minus b's read delay", bStart.Sub(term.end))
				}
				if !strings.Contains(a.logs.String(), "lost the lease; leader work cancelled") || !strings.Contains(a.logs.String(), "then=\"run returns ErrLeaderLost\"") {
					t.Errorf("no log line for the loss:\n%s", a.logs.String())
				}
				if got := a.changes; len(got) != 3 || got[0] || !got[1] || got[2] {
					t.Errorf("onChange calls %v, want [false true false]", got)
				}
				b.stop()
			})
		})
	}
}

func TestElector_AnotherHolderWroteTheLease_LeaderStopsAtNextRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		a := startReplica(t, store, leaders, testLeaderElection("a"), 0)
		synctest.Wait()
		time.Sleep(time.Second)
		store.put(coordinationv1.LeaseSpec{HolderIdentity: new("intruder"), LeaseDurationSeconds: new(int32(15))})
		a.waitDone(t, time.Minute)
		if !errors.Is(a.err, ErrLeaderLost) || !strings.Contains(a.err.Error(), `"intruder" holds it now`) {
			t.Errorf("a's run = %v, want ErrLeaderLost saying intruder holds it", a.err)
		}
		if term := a.termList()[0]; term.cancelled.Sub(term.start) != 2*time.Second {
			t.Errorf("a stopped leading %v after it began, want 2s (its next renewal)", term.cancelled.Sub(term.start))
		}
		if l, _ := store.get(); election.Holder(l) != "intruder" {
			t.Errorf("lease holder %q, want intruder's write left alone", election.Holder(l))
		}
	})
}

func TestElector_Forbidden_RunReturnsErrorNamingLeaseAndPermissions(t *testing.T) {
	forbid := func(which string) func(context.Context, string) error {
		return func(_ context.Context, verb string) error {
			if verb == which {
				return apierrors.NewForbidden(leasesResource, "lease", errors.New(`user "x" cannot `+verb))
			}
			return nil
		}
	}
	for _, tc := range []struct {
		verb   string
		exists bool
		after  time.Duration // when the fault begins
	}{{"get", false, 0}, {"create", false, 0}, {"update", true, 0}, {"update", false, 3 * time.Second}} {
		t.Run(fmt.Sprintf("%s after %v", tc.verb, tc.after), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, leaders := &memLeases{}, &atomic.Int32{}
				if tc.exists {
					store.put(coordinationv1.LeaseSpec{})
				}
				faulty := &faultyLeases{leaseStore: store}
				if tc.after == 0 {
					faulty.setFault(forbid(tc.verb))
				}
				cfg := testLeaderElection("a")
				cfg.Recampaign = true // even so, Forbidden ends run
				a := startReplica(t, faulty, leaders, cfg, 0)
				time.Sleep(tc.after)
				a.store.setFault(forbid(tc.verb))
				a.waitDone(t, time.Minute)
				want := "leader election: not allowed to " + tc.verb + " lease ns/lease: grant get, create, update on leases.coordination.k8s.io in namespace ns"
				if a.err == nil || !strings.Contains(a.err.Error(), want) || !apierrors.IsForbidden(a.err) {
					t.Errorf("run = %v, want an error containing %q that wraps the Forbidden answer", a.err, want)
				}
				// Refused while leading: the lease is lost, and says so.
				if lost := errors.Is(a.err, ErrLeaderLost); lost != (tc.after > 0) {
					t.Errorf("run = %v: matches ErrLeaderLost %v, want %v (refused while leading)", a.err, lost, tc.after > 0)
				}
				if _, writes := store.get(); writes > 3 {
					t.Errorf("%d writes: run must not spin on Forbidden", writes)
				}
			})
		})
	}
}

func TestElector_ThreeReplicasWithFaultsAndRestarts_NeverTwoLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, leaders := &memLeases{}, &atomic.Int32{}
		rng := rand.New(rand.NewPCG(1, 2))
		var rs [3]*replica
		start := func(i int) {
			cfg := testLeaderElection(fmt.Sprintf("r%d-%d", i, rng.IntN(1000)))
			cfg.Recampaign = rng.IntN(2) == 0
			cfg.KeepOnShutdown = rng.IntN(3) == 0
			rs[i] = startReplica(t, store, leaders, cfg, 0)
		}
		for i := range rs {
			start(i)
		}
		terms := 0
		for step := range 300 { // 300 steps of 0 to 3s: about 7 minutes
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
			r := rs[rng.IntN(3)]
			switch rng.IntN(6) {
			case 0:
				r.store.setFault(failUpdates)
			case 1:
				r.store.setFault(hangUpdates)
			case 2:
				r.store.setFault(nil)
			case 3: // restart (or start again after run returned ErrLeaderLost)
				i := step % 3
				terms += len(rs[i].termList())
				rs[i].stop()
				start(i)
			}
			if n := leaders.Load(); n > 1 {
				t.Fatalf("step %d: %d replicas lead", step, n)
			}
		}
		for _, r := range rs {
			terms += len(r.termList())
			r.stop()
		}
		if terms < 10 {
			t.Errorf("only %d terms in 300 steps: the test exercised too few hand-overs", terms)
		}
		t.Logf("%d terms", terms)
	})
}

package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

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

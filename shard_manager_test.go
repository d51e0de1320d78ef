package kctl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// Shard and ElectLeader exclude each other, whichever comes first, with
// an error naming both; the Identity "leader" is refused (the group's
// leader Lease is <group>-leader); Shard after Start is refused.
func TestShard_ExclusiveWithElectLeader_ErrorNamesBoth(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	opts := ShardOptions{Group: "podcount", Namespace: ns, Identity: "m-0"}
	le := LeaderElection{Name: "podcount", Namespace: ns}

	first := testManager(t, cfg, ns, Options{})
	if err := first.Shard(opts); err != nil {
		t.Fatal(err)
	}
	err := first.ElectLeader(le)
	if err == nil || !strings.Contains(err.Error(), "ElectLeader") || !strings.Contains(err.Error(), "Shard") {
		t.Errorf("ElectLeader after Shard: %v, want an error naming both", err)
	}

	second := testManager(t, cfg, ns, Options{})
	if err := second.ElectLeader(le); err != nil {
		t.Fatal(err)
	}
	err = second.Shard(opts)
	if err == nil || !strings.Contains(err.Error(), "ElectLeader") || !strings.Contains(err.Error(), "Shard") {
		t.Errorf("Shard after ElectLeader: %v, want an error naming both", err)
	}

	started := testManager(t, cfg, ns, Options{})
	startManager(t, started)
	eventually(t, "the Manager started", func() bool {
		started.mu.Lock()
		defer started.mu.Unlock()
		return started.started
	})
	if err := started.Shard(opts); err == nil || !strings.Contains(err.Error(), "after Start") {
		t.Errorf("Shard after Start: %v, want an error saying so", err)
	}

	third := testManager(t, cfg, ns, Options{})
	leader := opts
	leader.Identity = "leader"
	if err := third.Shard(leader); err == nil || !strings.Contains(err.Error(), "podcount-leader") {
		t.Errorf("Shard with Identity leader: %v, want an error naming the leader Lease", err)
	}
}

// failingLeases is the Lease client of a member whose writes fail while
// fail is set, as when the API server is unreachable.
type failingLeases struct {
	*Client[coordinationv1.Lease]
	fail atomic.Bool
}

func (f *failingLeases) Update(ctx context.Context, l *coordinationv1.Lease) error {
	if f.fail.Load() {
		return errors.New("injected: the API server is unreachable")
	}
	return f.Client.Update(ctx, l)
}

// A member that cannot renew its Lease for RenewDeadline stops all its
// work, before a peer could judge the Lease expired: it serves no range,
// and Manager.Start returns an error matching ErrLeaderLost.
func TestShardMember_CannotRenew_StopsAllWorkBeforeTheLeaseExpires(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		return Result{}, nil
	})
	leases := &failingLeases{Client: NewClient[coordinationv1.Lease](mgr.conn)}
	lease := 2 * time.Second
	run, err := mgr.shardWith(ShardOptions{
		Group: "podcount", Namespace: ns, Identity: "m-0", Ranges: 8,
		LeaseDuration: lease, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 300 * time.Millisecond,
	}, leases)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(t.Context()) }()
	m := &shardMember{id: "m-0", run: run}
	eventually(t, "m-0 serves every range", func() bool {
		return m.serves([]string{"m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0"})
	})
	failed := time.Now()
	leases.fail.Store(true)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return 30s after the renewals began to fail")
	}
	took := time.Since(failed)
	t.Logf("renewals failing: Start returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrLeaderLost) {
		t.Errorf("Start returned %v, want an error matching ErrLeaderLost", err)
	}
	if took >= lease {
		t.Errorf("the member stopped %v after its renewals began to fail, want less than its LeaseDuration %v", took, lease)
	}
	if !m.serves(make([]string, 8)) {
		t.Error("the member still serves ranges after losing its Lease")
	}
}

// A runnable that needs a leader runs on one member of a shard group, the
// group's leader (Lease <group>-leader), while the controllers run on
// every member; when that member stops, another leads.
func TestShard_LeaderOnlyRunnable_RunsOnOneMember(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var mu sync.Mutex
	running, most := 0, 0
	leaders := make(chan string, 4)
	var stops []func() error
	for _, id := range []string{"m-0", "m-1"} {
		mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: 5 * time.Second})
		NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
			return Result{}, nil
		})
		err := mgr.Shard(ShardOptions{Group: "podcount", Namespace: ns, Identity: id, Ranges: 8,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		err = mgr.Add(Runnable{Name: "once", NeedLeader: true, Run: func(ctx context.Context) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			leaders <- id
			<-ctx.Done()
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, startManager(t, mgr))
	}
	first := <-leaders
	t.Logf("%s leads the group", first)
	stop := stops[0]
	if first == "m-1" {
		stop = stops[1]
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var second string
	select {
	case second = <-leaders:
	case <-time.After(30 * time.Second):
		t.Fatal("no member led within 30s after the leader stopped")
	}
	if second == first {
		t.Errorf("%s led again after it stopped", second)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Errorf("the leader-only runnable ran on %d members at once, want 1", most)
	}
}

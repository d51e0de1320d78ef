package kctl

// Manager.Shard (shard_manager.go) and how a member stops: exclusive with
// ElectLeader, a leader-only Runnable on one member, a member that cannot
// renew its Lease, a graceful stop, a drain a stuck reconcile holds up.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/shardhash"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// fail is set, as when the API server is unreachable. It records when
// each successful update was sent, by Lease: the member's own, and the
// group's leader Lease.
type failingLeases struct {
	*Client[coordinationv1.Lease]
	fail atomic.Bool
	mu   sync.Mutex
	sent map[string][]time.Time // of the successful updates, by Lease name
}

func (f *failingLeases) Update(ctx context.Context, l *coordinationv1.Lease) error {
	if f.fail.Load() {
		return errors.New("injected: the API server is unreachable")
	}
	sent := time.Now()
	err := f.Client.Update(ctx, l)
	if err == nil {
		f.mu.Lock()
		if f.sent == nil {
			f.sent = map[string][]time.Time{}
		}
		f.sent[l.Name] = append(f.sent[l.Name], sent)
		f.mu.Unlock()
	}
	return err
}

// updates is how many updates of Lease name succeeded.
func (f *failingLeases) updates(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent[name])
}

// lastTwo is when the last two successful updates of the member's Lease
// name were sent. A member
// counts RenewDeadline from the start of its last successful renewal,
// which came after the one before it returned and before the last was
// sent: it must stop after prev + RenewDeadline, and its peers judge
// its Lease expired no sooner than last + LeaseDuration.
func (f *failingLeases) lastTwo(t *testing.T, name string) (prev, last time.Time) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	sent := f.sent[name]
	n := len(sent)
	if n < 2 {
		t.Fatalf("%d successful updates of Lease %s, want at least 2", n, name)
	}
	return sent[n-2], sent[n-1]
}

// stuckReconciles is a reconcile of ConfigMaps that runs until its
// context ends, recording when and why it ended.
type stuckReconciles struct {
	started chan struct{}
	ended   chan struct{}
	once    sync.Once
	at      time.Time // when the context ended; read after ended
	cause   error     // read after ended
}

func newStuckReconciles() *stuckReconciles {
	return &stuckReconciles{started: make(chan struct{}, 1), ended: make(chan struct{})}
}

func (s *stuckReconciles) reconcile(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	s.once.Do(func() {
		s.at = time.Now()
		s.cause = context.Cause(ctx)
		close(s.ended)
	})
	return Result{}, ctx.Err()
}

// inFlight makes ConfigMap ns/held and waits until its reconcile runs.
func (s *stuckReconciles) inFlight(t *testing.T, mgr *Manager, ns string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	if err := ClientFor[corev1.ConfigMap](mgr).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile started 30s after the ConfigMap was made")
	}
}

// A member that cannot renew its Lease for RenewDeadline stops all its
// work, before a peer could judge the Lease expired: its in-flight
// reconcile is cancelled (cause ErrLeaderLost), it serves no range, and
// Manager.Start returns an error matching ErrLeaderLost.
func TestShardMember_CannotRenew_StopsAllWorkBeforeTheLeaseExpires(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	stuck := newStuckReconciles()
	NewController(mgr, "stuck", stuck.reconcile)
	leases := &failingLeases{Client: NewClient[coordinationv1.Lease](mgr.conn)}
	opts := ShardOptions{
		Group: "podcount", Namespace: ns, Identity: "m-0", Ranges: 8,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 300 * time.Millisecond,
	}
	run, err := mgr.shardWith(opts, leases)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(t.Context()) }()
	m := &shardMember{id: "m-0", run: run}
	eventually(t, "m-0 serves every range", func() bool {
		return m.serves([]string{"m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0"})
	})
	stuck.inFlight(t, mgr, ns)
	failed := time.Now()
	leases.fail.Store(true)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return 30s after the renewals began to fail")
	}
	t.Logf("renewals failing: Start returned after %v: %v", time.Since(failed).Round(time.Millisecond), err)
	if !errors.Is(err, ErrLeaderLost) {
		t.Errorf("Start returned %v, want an error matching ErrLeaderLost", err)
	}
	select {
	case <-stuck.ended:
	default:
		t.Fatal("Start returned while the in-flight reconcile still runs")
	}
	prev, last := leases.lastTwo(t, opts.leaseName())
	t.Logf("the in-flight reconcile was cancelled %v after the last renewal was sent (%v after the renewals began to fail; RenewDeadline %v, LeaseDuration %v)",
		stuck.at.Sub(last).Round(time.Millisecond), stuck.at.Sub(failed).Round(time.Millisecond), opts.RenewDeadline, opts.LeaseDuration)
	if !errors.Is(stuck.cause, ErrLeaderLost) {
		t.Errorf("the reconcile's context ended with %v, want a cause matching ErrLeaderLost", stuck.cause)
	}
	if !stuck.at.After(prev.Add(opts.RenewDeadline)) {
		t.Errorf("the reconcile was cancelled %v after the last renewal but one was sent, want after RenewDeadline (%v)", stuck.at.Sub(prev), opts.RenewDeadline)
	}
	if !stuck.at.Before(last.Add(opts.LeaseDuration)) {
		t.Errorf("the reconcile was cancelled %v after the last renewal was sent, want before the LeaseDuration %v", stuck.at.Sub(last), opts.LeaseDuration)
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

// A member that stops gracefully drains its in-flight reconciles while it
// renews its Lease; when the renewals fail for RenewDeadline, it cancels
// them (cause ErrLeaderLost) before a peer could judge the Lease expired
// and take the range, instead of letting them run on to the shutdown's
// drain deadline; and Start returns an error matching ErrLeaderLost,
// though the stop began as the caller's.
func TestShardMember_GracefulStopCannotRenew_CancelsInFlightReconciles(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: time.Minute})
	stuck := newStuckReconciles()
	NewController(mgr, "stuck", stuck.reconcile)
	leases := &failingLeases{Client: NewClient[coordinationv1.Lease](mgr.conn)}
	opts := ShardOptions{
		Group: "stuck", Namespace: ns, Identity: "m-0", Ranges: 8,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 300 * time.Millisecond,
	}
	run, err := mgr.shardWith(opts, leases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	m := &shardMember{id: "m-0", run: run}
	eventually(t, "m-0 serves every range", func() bool {
		return m.serves([]string{"m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0", "m-0"})
	})
	stuck.inFlight(t, mgr, ns)

	stop() // a graceful stop: it drains the reconcile while it can renew
	renewals := leases.updates(opts.leaseName())
	cancelled := func() bool {
		select {
		case <-stuck.ended:
			return true
		default:
			return false
		}
	}
	eventually(t, "two renewals during the drain", func() bool {
		return cancelled() || leases.updates(opts.leaseName()) >= renewals+2
	})
	if cancelled() {
		t.Fatalf("the reconcile was cancelled (%v) after %d renewals during the drain, want it to drain while the member renews",
			stuck.cause, leases.updates(opts.leaseName())-renewals)
	}
	failed := time.Now()
	leases.fail.Store(true)
	select {
	case <-stuck.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the in-flight reconcile still ran 30s after the renewals began to fail")
	}
	prev, last := leases.lastTwo(t, opts.leaseName())
	t.Logf("renewals failing during a graceful stop: the reconcile was cancelled %v after the last renewal was sent (%v after the renewals began to fail; RenewDeadline %v, LeaseDuration %v): %v",
		stuck.at.Sub(last).Round(time.Millisecond), stuck.at.Sub(failed).Round(time.Millisecond), opts.RenewDeadline, opts.LeaseDuration, stuck.cause)
	if !errors.Is(stuck.cause, ErrLeaderLost) {
		t.Errorf("the reconcile's context ended with %v, want a cause matching ErrLeaderLost", stuck.cause)
	}
	if !stuck.at.After(prev.Add(opts.RenewDeadline)) {
		t.Errorf("the reconcile was cancelled %v after the last renewal but one was sent, want after RenewDeadline (%v): it drains while it renews", stuck.at.Sub(prev), opts.RenewDeadline)
	}
	if !stuck.at.Before(last.Add(opts.LeaseDuration)) {
		t.Errorf("the reconcile was cancelled %v after the last renewal was sent, want before the LeaseDuration %v", stuck.at.Sub(last), opts.LeaseDuration)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return 30s after the stop")
	}
	t.Logf("Start returned: %v", err)
	if !errors.Is(err, ErrLeaderLost) {
		t.Errorf("Start = %v, want an error matching ErrLeaderLost: the Lease was lost while draining", err)
	}
}

// A range whose in-flight reconcile ignores its context is released
// once it has drained for ShutdownTimeout, as a shutdown abandons such
// work: the new owner serves it then, not never, while the stuck
// reconcile still runs.
func TestShardGroup_StuckReconcile_DrainEndsAfterShutdownTimeout(t *testing.T) {
	cfg := testShardedConfig(t)
	leaseNS := testNamespace(t, cfg)
	ns := testNamespace(t, cfg)
	keys := shardFixture(t, cfg, []string{ns}, 1)
	const timeout = 2 * time.Second
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	stuck := func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		if rs.Namespace != ns {
			return Result{}, nil
		}
		select {
		case started <- struct{}{}:
			<-release // ignores ctx: stuck until the test ends
		default:
		}
		return Result{}, nil
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("member", "d-0")
	mgr, err := NewManager(Options{Config: cfg, Logger: logger, ShutdownTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	NewController(mgr, "podcount", stuck)
	run, err := mgr.shard(ShardOptions{
		Group: "podcount", Namespace: leaseNS, Identity: "d-0", Ranges: testShardRanges,
		LeaseDuration: testShardLease, RenewDeadline: 3 * testShardLease / 4, RenewPeriod: testShardRenew,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel(nil)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("d-0: Start did not return 30s after its context ended")
		}
	})
	// Registered after Start's cleanup, so it runs first: the stuck
	// reconcile returns before the Manager stops, and its worker does
	// not log through t after the test has ended.
	t.Cleanup(func() { close(release) })
	d0 := &shardMember{id: "d-0", run: run}
	waitServing(t, []*shardMember{d0})
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("d-0 did not reconcile %v within 30s", keys[0])
	}

	// The second member's identity is one to which ns's range moves.
	r := shardhash.Bucket(ns, testShardRanges)
	second := ""
	for i := 1; second == ""; i++ {
		id := fmt.Sprintf("d-%d", i)
		if shardhash.AssignWeighted([]string{"d-0", id}, run.weights())[r] == id {
			second = id
		}
	}
	joined := time.Now()
	d1 := startShardMember(t, cfg, leaseNS, second, &shardLog{})
	waitServing(t, []*shardMember{d0, d1})
	took := time.Since(joined)
	t.Logf("%s served the range of a stuck reconcile %v after it joined (ShutdownTimeout %v)", second, took.Round(time.Millisecond), timeout)
	if took < timeout {
		t.Errorf("the range moved %v after the join, before its drain's ShutdownTimeout %v", took, timeout)
	}
	if limit := timeout + 4*testShardRenew + 2*time.Second; took > limit {
		t.Errorf("the range moved %v after the join, want at most %v", took, limit)
	}
	select {
	case <-started:
		t.Error("the stuck reconcile ran twice on d-0")
	default:
	}
}

package kctl

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/shardhash"
	appsv1 "k8s.io/api/apps/v1"
)

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

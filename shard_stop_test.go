package kctl

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A member that stops gracefully drains its in-flight reconciles while it
// renews its Lease; when the renewals fail for RenewDeadline, it cancels
// them (cause ErrLeaderLost) before a peer could judge the Lease expired
// and take the range, instead of letting them run on to the shutdown's
// drain deadline.
func TestShardMember_GracefulStopCannotRenew_CancelsInFlightReconciles(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: time.Minute})
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	NewController(mgr, "stuck", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return Result{}, ctx.Err()
	})
	leases := &failingLeases{Client: NewClient[coordinationv1.Lease](mgr.conn)}
	lease := 2 * time.Second
	run, err := mgr.shardWith(ShardOptions{
		Group: "stuck", Namespace: ns, Identity: "m-0", Ranges: 8,
		LeaseDuration: lease, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 300 * time.Millisecond,
	}, leases)
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
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	err = ClientFor[corev1.ConfigMap](mgr).Create(t.Context(), cm)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile started 30s after the ConfigMap was made")
	}

	failed := time.Now()
	leases.fail.Store(true)
	stop() // a graceful stop: it drains the reconcile while it can renew
	select {
	case err = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the in-flight reconcile still ran 30s after the renewals began to fail")
	}
	took := time.Since(failed)
	t.Logf("renewals failing during a graceful stop: the reconcile was cancelled after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrLeaderLost) {
		t.Errorf("the reconcile's context ended with %v, want a cause matching ErrLeaderLost", err)
	}
	if took >= lease {
		t.Errorf("the reconcile was cancelled %v after the renewals began to fail, want less than the LeaseDuration %v", took, lease)
	}
	select {
	case err = <-done:
		t.Logf("Start returned: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return 30s after the stop")
	}
}

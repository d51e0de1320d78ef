package kctl

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

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

package kctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

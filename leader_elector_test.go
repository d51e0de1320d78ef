package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/election"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

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
	role := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"leases"},
		"rules":[{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":[%s]}]}`, verbs)
	binding := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"leases"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"leases"},
		"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"kctl-unprivileged"}]}`
	for _, obj := range []struct{ path, body string }{{"roles", role}, {"rolebindings", binding}} {
		path := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/" + obj.path
		if code, resp := testRawRequest(t, admin, "POST", path, obj.body); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, code, resp)
		}
	}
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

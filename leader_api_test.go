package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
				if l, err := leases.Get(t.Context(), ns, "leader-test"); err != nil || holderOf(l) != leader.id {
					t.Fatalf("lease holder %q (%v), want the leading replica %s", holderOf(l), err, leader.id)
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
			err = e.run(ctx, func(context.Context, context.Context) { t.Error("lead was called") })
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

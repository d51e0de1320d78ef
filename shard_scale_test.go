package kctl

// The shard tests' scale and their time bounds. The scale and endurance
// tests (the group of 3 over thousands of objects, the churn of
// membership changes) run small under go test and make test, in full
// under make test-scale (KCTL_TEST_SCALE=full). Their waits are bounded
// by what the members are configured with (LeaseDuration, RenewPeriod)
// and by what the server is measured to take during the test, not by a
// fixed number of seconds that a loaded machine breaks.

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// testScaleEnv selects the scale of the shard scale tests: "full" runs
// them as make test-scale does; unset or "small", their small variants.
const testScaleEnv = "KCTL_TEST_SCALE"

// shardScale is the size of a scale test.
type shardScale struct {
	full bool
	// groupNamespaces and groupPerNS: the group tests' fixture
	// (runShardGroup), groupPerNS ReplicaSets with a Pod each per namespace.
	groupNamespaces, groupPerNS int
	// steps: the churn tests' membership changes.
	steps []churnStep
}

// testShardScale is the scale KCTL_TEST_SCALE asks for: full, 3,000
// ReplicaSets in 300 namespaces and the 20 churn steps; small, 300 in 60
// and the first 6 steps (1 member to 3, a kill, a graceful stop, back
// to 3).
func testShardScale(t *testing.T) shardScale {
	t.Helper()
	switch v := os.Getenv(testScaleEnv); v {
	case "full":
		return shardScale{full: true, groupNamespaces: 300, groupPerNS: 10, steps: churnSteps}
	case "", "small":
		return shardScale{groupNamespaces: 60, groupPerNS: 5, steps: churnSteps[:6]}
	default:
		t.Fatalf("%s=%q: want full, small or unset", testScaleEnv, v)
		return shardScale{}
	}
}

// settleBound is how long a group of members configured with lease and
// renew may go without any member's state changing (a range claimed,
// started, served, drained, or a namespace weighed) before a wait for
// it to settle gives up, when listing the objects the members cache
// takes relist: a peer sees a change at its next look (one renew); a
// killed member's Lease expires lease after its last renewal and is
// judged so at a look (one renew) after that, when the survivor claims
// (a hurried look: one renew at most); a range it starts is served
// once every informer has listed again with the new selector, which
// may change once more while they list (twice relist, for each of the
// two informers a pod member runs). A step that takes longer is stuck,
// whatever the machine's load: the load shows in relist.
func settleBound(lease, renew, relist time.Duration) time.Duration {
	return lease + 3*renew + 4*relist
}

// settleCap bounds a whole wait to settle, progress or not: ten
// settleBounds, so that members changing their minds forever fail.
func settleCap(bound time.Duration) time.Duration { return 10 * bound }

// measureRelist is the longest of 2 Lists of every ReplicaSet and Pod
// on cfg's server, which is what a member lists again when its ranges
// change (at most: a member lists its share).
func measureRelist(t *testing.T, cfg *rest.Config) time.Duration {
	t.Helper()
	conn := fixtureConn(t, cfg)
	rsets := NewClient[appsv1.ReplicaSet](conn)
	pods := NewClient[corev1.Pod](conn)
	var longest time.Duration
	for range 2 {
		began := time.Now()
		if _, err := rsets.List(t.Context(), ListOptions{}); err != nil {
			t.Fatalf("measuring a relist: %v", err)
		}
		if _, err := pods.List(t.Context(), ListOptions{}); err != nil {
			t.Fatalf("measuring a relist: %v", err)
		}
		longest = max(longest, time.Since(began))
	}
	return longest
}

// leaseRoundTrip is the longest of 3 GETs of a Lease in ns (a missing
// one answers NotFound as fast): the server's latency for the requests
// a handover makes, measured while the test runs.
func leaseRoundTrip(ctx context.Context, t *testing.T, cfg *rest.Config, ns string) time.Duration {
	t.Helper()
	leases := NewClient[coordinationv1.Lease](fixtureConn(t, cfg))
	var rtts []time.Duration
	for range 3 {
		began := time.Now()
		_, err := leases.Get(ctx, ns, "kctl-latency-probe")
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("measuring a Lease round trip: %v", err)
		}
		rtts = append(rtts, time.Since(began))
	}
	return slices.Max(rtts)
}

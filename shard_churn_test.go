package kctl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/podfixture"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Membership changes while objects change at about 50/s: the group grows
// from 1 member to 3; members stop gracefully, are killed (their context
// ends at once and their Lease is left to expire, as after a SIGKILL) and
// come back under their own identity, 20 changes in all (6 in the
// small variant: testShardScale). After each the live members settle
// on their ranges; at no time is a key reconciled by two members at once;
// and once the changes stop, every object is reconciled by its owner.
func TestShardGroup_MembershipChurn_NoOverlapNothingLost(t *testing.T) {
	scale := testShardScale(t)
	cfg := testShardedConfig(t)
	leaseNS := testNamespace(t, cfg)
	keys := shardFixture(t, cfg, podfixture.Namespaces(60), 2)
	log := &shardLog{}
	live := map[string]*shardMember{}
	live["m-0"] = startShardMember(t, cfg, leaseNS, "m-0", log)
	var owners []string
	settle := func(step string) {
		t.Helper()
		var ms []*shardMember
		for _, id := range slices.Sorted(maps.Keys(live)) {
			ms = append(ms, live[id])
		}
		start := time.Now()
		owners = waitServing(t, ms)
		t.Logf("%s: %d members settled in %v", step, len(ms), time.Since(start).Round(time.Millisecond))
	}
	settle("start")

	ch := startChurn(t, cfg, keys)
	for _, s := range scale.steps {
		switch s.op {
		case "stop":
			live[s.id].stop(t, nil)
			delete(live, s.id)
		case "kill":
			live[s.id].run.keepLease.Store(true)
			live[s.id].stop(t, fmt.Errorf("killed: %w", ErrLeaderLost))
			delete(live, s.id)
		case "start":
			live[s.id] = startShardMember(t, cfg, leaseNS, s.id, log)
		}
		settle(s.op + " " + s.id)
	}
	ch.stop()
	n, rate := ch.made()
	t.Logf("%d changes during the membership changes (%.1f/s)", n, rate)

	per := checkReconciledBy(t, cfg, log, keys, owners, "after-churn")
	t.Logf("after the churn: reconciled %v", per)
	if bad := log.overlaps(); len(bad) > 0 {
		t.Errorf("%d keys reconciled by two members at once:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	log.mu.Lock()
	t.Logf("%d reconciles recorded", len(log.spans))
	log.mu.Unlock()
}

// churnStep is one membership change: op "start", "stop" or "kill"
// member id.
type churnStep struct{ op, id string }

// churnSteps are the churn tests' 20 membership changes at full scale
// (testShardScale): from 1 member to 3, then 4 kills and 5 graceful
// stops, back to 3 after each.
var churnSteps = []churnStep{
	{"start", "m-1"}, {"start", "m-2"},
	{"kill", "m-1"}, {"stop", "m-2"}, {"start", "m-1"}, {"start", "m-2"},
	{"stop", "m-0"}, {"start", "m-0"}, {"kill", "m-2"}, {"start", "m-2"},
	{"stop", "m-1"}, {"start", "m-1"}, {"kill", "m-0"}, {"start", "m-0"},
	{"stop", "m-2"}, {"kill", "m-1"}, {"start", "m-1"}, {"start", "m-2"},
	{"stop", "m-0"}, {"start", "m-0"},
}

// churn is the ReplicaSet changes made while members come and go.
type churn struct {
	began time.Time
	// stop ends the changes and waits for those in flight; t's cleanup
	// calls it too (a failed step ends the test: no Errorf after it).
	stop func()
	mu   sync.Mutex
	n    int         // changes made
	last map[Key]int // each key's last churn annotation
}

// startChurn patches keys' ReplicaSets round robin every 20 ms (50/s),
// the i-th with the annotation churn=<i>, up to 16 at once: a loaded
// server answers a patch in more than 20 ms.
func startChurn(t *testing.T, cfg *rest.Config, keys []Key) *churn {
	c := &churn{began: time.Now(), last: map[Key]int{}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	c.stop = sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
	t.Cleanup(c.stop)
	rsets := NewClient[appsv1.ReplicaSet](testProbeConn(t, cfg))
	inFlight := make(chan struct{}, 16)
	patch := func(i int) {
		defer func() { <-inFlight }()
		k := keys[i%len(keys)]
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		body := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"churn":"%d"}}}`, i))
		if err := rsets.Patch(t.Context(), rs, MergePatch, body, PatchOptions{}); err != nil {
			t.Errorf("churn: %v", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n++
		if n, ok := c.last[k]; !ok || i > n {
			c.last[k] = i
		}
	}
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			select {
			case <-done:
				return
			case inFlight <- struct{}{}:
			}
			wg.Go(func() { patch(i) })
		}
	})
	return c
}

// made is the changes made so far and their rate per second.
func (c *churn) made() (int, float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, float64(c.n) / time.Since(c.began).Seconds()
}

// lastOf is each key's last churn annotation, once stopped.
func (c *churn) lastOf() map[Key]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.last)
}

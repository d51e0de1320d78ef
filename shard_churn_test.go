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
)

// Membership changes while objects change at about 50/s: the group grows
// from 1 member to 3; members stop gracefully, are killed (their context
// ends at once and their Lease is left to expire, as after a SIGKILL) and
// come back under their own identity, 20 changes in all. After each the live members settle
// on their ranges; at no time is a key reconciled by two members at once;
// and once the changes stop, every object is reconciled by its owner.
func TestShardGroup_MembershipChurn_NoOverlapNothingLost(t *testing.T) {
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

	// Changes at about 50/s, round robin over the ReplicaSets.
	stop := make(chan struct{})
	var churn sync.WaitGroup
	stopChurn := sync.OnceFunc(func() {
		close(stop)
		churn.Wait()
	})
	t.Cleanup(stopChurn) // a failed step ends the test: no Errorf after it
	changes := 0
	churn.Go(func() {
		rsets := NewClient[appsv1.ReplicaSet](testProbeConn(t, cfg))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			k := keys[i%len(keys)]
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"churn":"%d"}}}`, i))
			if err := rsets.Patch(t.Context(), rs, MergePatch, patch, PatchOptions{}); err != nil {
				t.Errorf("churn: %v", err)
				return
			}
			changes = i + 1
		}
	})
	// From 1 member to 3, then 18 changes more: 4 kills, 5 graceful
	// stops, and back to 3 each time.
	steps := []struct{ op, id string }{
		{"start", "m-1"}, {"start", "m-2"},
		{"kill", "m-1"}, {"stop", "m-2"}, {"start", "m-1"}, {"start", "m-2"},
		{"stop", "m-0"}, {"start", "m-0"}, {"kill", "m-2"}, {"start", "m-2"},
		{"stop", "m-1"}, {"start", "m-1"}, {"kill", "m-0"}, {"start", "m-0"},
		{"stop", "m-2"}, {"kill", "m-1"}, {"start", "m-1"}, {"start", "m-2"},
		{"stop", "m-0"}, {"start", "m-0"},
	}
	for _, s := range steps {
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
	stopChurn()
	t.Logf("%d changes made during the membership changes", changes)

	per := checkReconciledBy(t, cfg, log, keys, owners, "after-churn")
	t.Logf("after the churn: reconciled %v", per)
	if bad := log.overlaps(); len(bad) > 0 {
		t.Errorf("%d keys reconciled by two members at once:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	log.mu.Lock()
	t.Logf("%d reconciles recorded", len(log.spans))
	log.mu.Unlock()
}

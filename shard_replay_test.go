package kctl

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/shardhash"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
)

// After a member of 3 is killed (its Lease left to expire), each
// survivor reconciles the ReplicaSets of the ranges it gained, and not
// those it served all along: at most 1.2 times as many reconciles as
// keys moved to it, every moved key among them. The moved keys are
// counted from the ranges each member served before and after the kill,
// over every ReplicaSet of the cluster as the server lists it. Before,
// each survivor queued its whole cache again: about 3 times the moved
// keys.
func TestShardGroup_Kill_SurvivorsReplayOnlyWhatMoved(t *testing.T) {
	cfg := testShardedConfig(t)
	leaseNS := testNamespace(t, cfg)
	shardFixture(t, cfg, podfixture.Namespaces(60), 6)
	log := &shardLog{}
	var ms []*shardMember
	for _, id := range []string{"m-0", "m-1", "m-2"} {
		ms = append(ms, startShardMember(t, cfg, leaseNS, id, log))
	}
	started := time.Now()
	waitServing(t, ms)
	keys := clusterReplicaSets(t, cfg)
	eventually(t, "every ReplicaSet reconciled, and the members idle", steadily(func() bool {
		got := log.since(started.Add(-time.Minute))
		done := !slices.ContainsFunc(keys, func(k Key) bool { return len(got[k]) == 0 })
		return done && !slices.ContainsFunc(ms, busyMember)
	}))
	before := servedBy(ms)

	ms[2].run.keepLease.Store(true)
	killed := time.Now()
	ms[2].stop(t, fmt.Errorf("killed: %w", ErrLeaderLost))
	survivors := ms[:2]
	waitServing(t, survivors)
	after := servedBy(survivors)
	moved := map[string][]Key{}
	for _, k := range keys {
		r := shardhash.Bucket(k.Namespace, testShardRanges)
		if after[r] != before[r] {
			moved[after[r]] = append(moved[after[r]], k)
		}
	}
	eventually(t, "every moved ReplicaSet reconciled by its new owner, and the survivors idle", steadily(func() bool {
		got := log.since(killed)
		for id, ks := range moved {
			for _, k := range ks {
				if !slices.Contains(got[k], id) {
					return false
				}
			}
		}
		return !slices.ContainsFunc(survivors, busyMember)
	}))
	took := time.Since(killed)
	reconciled := map[string]int{}
	for _, by := range log.since(killed) {
		for _, id := range by {
			reconciled[id]++
		}
	}
	for _, m := range survivors {
		n, want := reconciled[m.id], len(moved[m.id])
		t.Logf("%s: %d reconciles after the kill, %d ReplicaSets moved to it (%.2fx), of %d in the cluster",
			m.id, n, want, float64(n)/float64(max(want, 1)), len(keys))
		if want == 0 {
			t.Errorf("%s gained no ReplicaSet from the killed member", m.id)
		}
		if n*10 > want*12 {
			t.Errorf("%s reconciled %d keys after the kill, want at most 1.2 × the %d that moved to it", m.id, n, want)
		}
	}
	t.Logf("the survivors served and reconciled every moved ReplicaSet %v after the kill", took.Round(time.Millisecond))
}

// clusterReplicaSets is the key of every ReplicaSet of the cluster, as
// the server lists it.
func clusterReplicaSets(t *testing.T, cfg *rest.Config) []Key {
	t.Helper()
	list, err := NewClient[appsv1.ReplicaSet](fixtureConn(t, cfg)).List(t.Context(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]Key, len(list))
	for i, rs := range list {
		keys[i] = Key{rs.Namespace, rs.Name}
	}
	return keys
}

// servedBy is, for each range, the member of ms that serves it ("" if
// none).
func servedBy(ms []*shardMember) []string {
	owners := make([]string, testShardRanges)
	for _, m := range ms {
		m.run.mu.RLock()
		for r, on := range m.run.serving {
			if on {
				owners[r] = m.id
			}
		}
		m.run.mu.RUnlock()
	}
	return owners
}

// steadily is cond, true only once cond held at 5 polls in a row: a
// member's replay is queued just after its range is served.
func steadily(cond func() bool) func() bool {
	row := 0
	return func() bool {
		row++
		if !cond() {
			row = 0
		}
		return row >= 5
	}
}

// busyMember reports whether m's controller has a key queued or being
// reconciled, or a started range not yet served (whose replay is to
// come).
func busyMember(m *shardMember) bool {
	m.run.mu.RLock()
	held, serving := count(m.run.held), count(m.run.serving)
	m.run.mu.RUnlock()
	c := m.mgr.byName["podcount"].(*controller[*appsv1.ReplicaSet])
	c.mu.Lock()
	q := c.queue
	active := len(c.active)
	c.mu.Unlock()
	return held != serving || active > 0 || q == nil || q.Len() > 0
}

package kctl

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Namespaces created while a group runs: each new namespace's range owner
// lists again with a selector naming it (its cache did not hold it), and
// the ranges' weights change under the members, who may reassign ranges.
// Every ReplicaSet of the new namespaces is reconciled and cached by the
// member that owns it once the members agree, by no other, and no key is
// reconciled by two members at once.
func TestShardGroup_NamespaceCreatedWhileRunning_ReachesItsOwner(t *testing.T) {
	cfg := testShardedConfig(t)
	leaseNS := testNamespace(t, cfg)
	log := &shardLog{}
	ms := []*shardMember{
		startShardMember(t, cfg, leaseNS, "n-0", log),
		startShardMember(t, cfg, leaseNS, "n-1", log),
	}
	waitServing(t, ms)
	run := strings.ToLower(randomSuffix())
	var nss []string
	for i := range 12 {
		nss = append(nss, fmt.Sprintf("late-%s-%02d", run, i))
	}
	created := time.Now()
	keys := shardFixture(t, cfg, nss, 1)
	owners := waitServing(t, ms)
	eventually(t, "every new ReplicaSet reconciled", func() bool {
		got := log.since(created)
		for _, k := range keys {
			if len(got[k]) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("12 namespaces created while running: all reconciled in %v", time.Since(created).Round(time.Millisecond))
	for _, m := range ms {
		want := map[Key]bool{}
		for _, k := range keys {
			if expectedOwner(owners, k) == m.id {
				want[k] = true
			}
		}
		eventually(t, m.id+" caches exactly its new ReplicaSets", func() bool {
			objs, _ := m.rsets.List(ListOptions{})
			n := 0
			for _, o := range objs {
				k := Key{o.Namespace, o.Name}
				if strings.HasPrefix(o.Namespace, "late-"+run) {
					if !want[k] {
						return false
					}
					n++
				}
			}
			return n == len(want)
		})
	}
	checkReconciledBy(t, cfg, log, keys, owners, "after-create")
	if bad := log.overlaps(); len(bad) > 0 {
		t.Errorf("%d keys reconciled by two members at once:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
}

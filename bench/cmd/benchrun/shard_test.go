package main

import (
	"strings"
	"testing"
)

// A page as a sharded podcount replica serves it (internal/metrics):
// two result series of the controller, another controller's, a Pod and a
// ReplicaSet informer, the shard's series and the heap.
const shardPage = `# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="podcount",result="success"} 9990
controller_runtime_reconcile_total{controller="podcount",result="error"} 10
controller_runtime_reconcile_total{controller="other",result="success"} 5
workqueue_depth{controller="podcount",name="podcount"} 0
controller_runtime_active_workers{controller="podcount"} 0
kctl_shard_members{group="bench-0-3"} 3
kctl_shard_ranges_owned{group="bench-0-3"} 21
kctl_shard_handovers_total{group="bench-0-3"} 21
kctl_cache_objects{resource="replicasets.apps/v1"} 10000
kctl_cache_objects{resource="pods/v1"} 10000
kctl_cache_objects{resource="podtemplates/v1"} 7
kctl_cache_bytes{resource="replicasets.apps/v1"} 3e+06
kctl_cache_bytes{resource="pods/v1"} 4.8e+07
go_memstats_heap_alloc_bytes 6.1e+07
`

// TestParseShardMetrics_SumsThePodcountSeries reads each value the
// done check and the report use, summing a controller's result series
// and leaving out other controllers'.
func TestParseShardMetrics_SumsThePodcountSeries(t *testing.T) {
	m, err := parseShardMetrics(strings.NewReader(shardPage))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"reconciles": 10000, "depth": 0, "active": 0, "members": 3, "owned": 21,
		"handovers": 21, "cached": 10000, "pods": 10000, "cache_bytes": 5.1e7, "heap": 6.1e7}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

// TestShardDone_NeedsEveryObjectOnceAndAllRanges: three replicas are done
// only when each sees 3 members, the ranges add up, every ReplicaSet and
// Pod is cached once between them, and no queue holds work.
func TestShardDone_NeedsEveryObjectOnceAndAllRanges(t *testing.T) {
	se := &shardEnv{total: 30000, pods: 1, ranges: 64}
	replica := func(owned, cached float64) map[string]float64 {
		return map[string]float64{"members": 3, "owned": owned, "cached": cached, "pods": cached, "reconciles": cached}
	}
	ms := []map[string]float64{replica(21, 10000), replica(21, 10000), replica(22, 10000)}
	if !se.done(ms, 3) || !se.settled(ms, 3) {
		t.Fatal("three replicas holding a third each, all ranges served: want done and settled")
	}
	ms[2]["pods"] = 9999
	if se.done(ms, 3) {
		t.Error("a Pod not cached yet: want not done")
	}
	ms[2]["pods"] = 10000
	ms[1]["depth"] = 1
	if se.done(ms, 3) {
		t.Error("a key still queued: want not done")
	}
	ms[1]["depth"] = 0
	ms[0]["members"] = 2
	if se.done(ms, 3) || se.settled(ms, 3) {
		t.Error("a replica that sees 2 members: want neither settled nor done")
	}
	if se.done(append(ms[1:], nil), 3) {
		t.Error("a replica not serving metrics yet: want not done")
	}
}

package kctl

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kctl-dev/kctl/internal/shardhash"
	corev1 "k8s.io/api/core/v1"
)

// slowLister is a sharded informer whose list with the new selector has
// not come back until listed is set.
type slowLister struct {
	res    Resource
	listed atomic.Bool
}

func (f *slowLister) resource() Resource      { return f.res }
func (f *slowLister) setShard(func() string)  {}
func (f *slowLister) reshard()                {}
func (f *slowLister) listedWith(string) bool  { return f.listed.Load() }
func (f *slowLister) heldRanges(n int) []bool { return make([]bool, n) }

// keyInRange is a key whose namespace falls in range r of ranges.
func keyInRange(r, ranges int) Key {
	for i := 0; ; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		if shardhash.Bucket(ns, ranges) == r {
			return Key{ns, "x"}
		}
	}
}

// A range that starts is served (its keys reconciled) only once every
// sharded informer holds a list made with the selector that takes it
// in: with a ReplicaSet's Pods still being listed, a reconcile of the
// ReplicaSet would count none. Seen in runShardGroup with whole Pods:
// at a handover the ReplicaSets' relist came back before the Pods', and
// 34 reconciles counted 0 Pods.
func TestShardRun_StartedRange_ServedOnceEveryInformerListed(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	run, err := mgr.shard(ShardOptions{Group: "listed", Namespace: ns, Identity: "m-0", Ranges: 8})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowLister{res: testResource[corev1.Pod](t)}
	run.informers = append(run.informers, slow)
	run.served[slow.res] = true
	k := keyInRange(3, 8)

	run.act([]int{3}, nil)
	if run.owns(k) {
		t.Fatalf("range 3 is served while the Pods' informer has not listed it")
	}
	run.serveListed()
	if run.owns(k) {
		t.Fatalf("range 3 is served while the Pods' informer has not listed it")
	}
	slow.listed.Store(true)
	run.serveListed()
	if !run.owns(k) {
		t.Fatalf("range 3 is not served once every informer listed it")
	}

	// A range drained before it was served is not served later.
	slow.listed.Store(false)
	run.act([]int{5}, nil)
	run.act(nil, []int{5})
	slow.listed.Store(true)
	run.serveListed()
	if run.owns(keyInRange(5, 8)) {
		t.Errorf("range 5, drained while starting, is served")
	}
	if !run.owns(k) {
		t.Errorf("range 3 is no longer served")
	}
}

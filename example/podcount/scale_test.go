package main

import (
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestPodcount_InMemory_100ReplicaSetsFollow50Changes runs podcount over
// 100 ReplicaSets with two Pods each until every one is labelled, then
// makes 50 changes (a Pod added to one, taken from another) and waits until
// the labels follow: in memory, with no binary, in a fraction of a second.
func TestPodcount_InMemory_100ReplicaSetsFollow50Changes(t *testing.T) {
	start := time.Now()
	followChanges(t, kctltest.StartInMemory(t), 100, 50)
	t.Logf("100 ReplicaSets, 200 Pods, 50 changes: %v", time.Since(start))
}

// In a synctest bubble the same run is deterministic: every goroutine of
// the Manager runs on the bubble's clock, and Eventually's waits are fake
// time, so a run cannot fail by being slow.
func TestPodcount_InMemory_Synctest_SameEveryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		followChanges(t, kctltest.StartInMemory(t), 20, 10)
	})
}

func followChanges(t *testing.T, env *kctltest.Env, replicaSets, changes int) {
	ns := env.Namespace(t)
	env.Manager(t, inNamespace(ns), setup)
	ctx := t.Context()
	rsets := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	var all []*appsv1.ReplicaSet
	want := map[string]int{}
	for i := range replicaSets {
		rs := replicaSet(ns, fmt.Sprintf("rs-%d", i))
		if err := rsets.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
		all = append(all, rs)
		for j := range 2 {
			if err := pods.Create(ctx, ownedPod(t, rs, fmt.Sprintf("%s-%d", rs.Name, j))); err != nil {
				t.Fatal(err)
			}
		}
		want[rs.Name] = 2
	}
	converged := func(step string) {
		t.Helper()
		kctltest.Eventually(t, step, func() string {
			list, err := rsets.List(ctx, kctl.ListOptions{Namespace: ns})
			if err != nil {
				return err.Error()
			}
			wrong := 0
			for _, rs := range list {
				if rs.Labels["pod-count"] != strconv.Itoa(want[rs.Name]) {
					wrong++
				}
			}
			if wrong > 0 || len(list) != replicaSets {
				return fmt.Sprintf("%d of %d ReplicaSets not labelled as wanted", wrong, len(list))
			}
			return ""
		})
	}
	converged("every ReplicaSet labelled pod-count=2")
	for i := range changes {
		rs := all[(i*7)%len(all)]
		if i%2 == 0 {
			if err := pods.Create(ctx, ownedPod(t, rs, fmt.Sprintf("%s-extra-%d", rs.Name, i))); err != nil {
				t.Fatal(err)
			}
			want[rs.Name]++
		} else {
			if err := pods.Delete(ctx, ns, rs.Name+"-0"); err != nil {
				t.Fatal(err)
			}
			want[rs.Name]--
		}
	}
	converged(fmt.Sprintf("the labels follow %d changes", changes))
}

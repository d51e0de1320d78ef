package kctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	runtimemetrics "runtime/metrics"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kctl-dev/kctl/internal/podfixture"
)

// BenchmarkSharer_RetainedHeap is the live heap, after GC, that a cache of
// 10,000 Pods holds (the decoded Pods and the sharer's own tables), decoded
// from protobuf pages of 500 as the cache decodes a list (managedFields
// skipped), with and without sharing: on realistic Pods (podfixture: 20
// workloads over 50 nodes, each Pod with its own token volume and a kubelet's
// status) and on near-identical ones (realisticPod: one workload). Run with
//
//	go test -run '^$' -bench 'Sharer_RetainedHeap' -benchtime 1x -count 5 .
//
// and read retained-MB.
func BenchmarkSharer_RetainedHeap(b *testing.B) {
	fixtures := []struct {
		name string
		pod  func(i int) *corev1.Pod
	}{
		{"realistic", func(i int) *corev1.Pod { return podfixture.Pod("shop", i) }},
		{"identical", realisticPod},
	}
	for _, f := range fixtures {
		for _, share := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/share=%v", f.name, share), func(b *testing.B) {
				var mb float64
				for b.Loop() {
					mb = retainedHeap(b, f.pod, 10000, share)
				}
				b.ReportMetric(mb, "retained-MB")
			})
		}
	}
}

func retainedHeap(b *testing.B, pod func(i int) *corev1.Pod, n int, share bool) float64 {
	c := podCodec()
	c.skipManagedFields = true
	s := newSharer[corev1.Pod]()
	kept := make([]*corev1.Pod, 0, n)
	before := liveHeap()
	for start := 0; start < n; start += 500 {
		list := &corev1.PodList{}
		for i := start; i < min(start+500, n); i++ {
			list.Items = append(list.Items, *pod(i))
		}
		raw, err := list.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		items, _, _, err := c.decodeList(mediaProtobuf, envelope("PodList", raw))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range items {
			if share {
				s.share(p)
			}
			kept = append(kept, p)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(kept)
	runtime.KeepAlive(s)
	return float64(after-before) / (1 << 20)
}

// liveHeap is the heap that the garbage collector found live, after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	m := []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	runtimemetrics.Read(m)
	return m[0].Value.Uint64()
}

// The real API server stores podfixture's Pods as generated: the fixture
// already holds every default the server adds, so Pods decoded in process
// weigh what Pods listed from a server do (managedFields aside), and
// bench's -sync-fixture varied can create them (then write their status).
func TestPodFixture_TheServerStoresItAsGenerated(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pods := NewClient[corev1.Pod](conn)
	for i := range 2 * podfixture.Workloads {
		want := podfixture.Pod(ns, i)
		pod := want.DeepCopy()
		pod.UID = ""
		pod.ResourceVersion = ""
		if err := pods.Create(t.Context(), pod); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		pod.Status = want.Status
		if err := pods.UpdateStatus(t.Context(), pod); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		got, err := pods.Get(t.Context(), ns, want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !sameProto(&got.Spec, &want.Spec) || !sameProto(&got.Status, &want.Status) {
			g, _ := json.Marshal(struct{ Spec, Status any }{got.Spec, got.Status})
			w, _ := json.Marshal(struct{ Spec, Status any }{want.Spec, want.Status})
			t.Fatalf("pod %d as the server stores it:\n%s\nas generated:\n%s", i, g, w)
		}
	}
}

// sameProto says whether a and b encode alike (equal content, whatever the
// time zone of their times or the cached form of their quantities).
func sameProto(a, b protoObject) bool {
	x, errA := a.Marshal()
	y, errB := b.Marshal()
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

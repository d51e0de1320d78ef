package kctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	runtimemetrics "runtime/metrics"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kctl-dev/kctl/internal/podfixture"
)

// Sharing itself (internal/share) is tested in its package; these tests
// need the real API server: the informer shares what it stores, and
// podfixture's Pods, on which the sharer's memory is measured, are what a
// server stores.

// Regression (issue 15, item 14), against the real API server: a cache of one
// ConfigMap updated 600 times with 16 KiB of fresh values each time (9.4 MiB
// in all) pinned every old version's data; now the heap after the churn is
// within 2 MiB of where it was.
func TestInformer_ConfigMapChurn_PinsNothing(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := NewClient[corev1.ConfigMap](conn)
	cm := newCM(ns, "churn", "0")
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{})
	if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	update := func(i int) {
		t.Helper()
		cm.Data = map[string]string{"v": fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 16<<10))}
		if err := cms.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(i int) func() bool {
		return func() bool {
			got, ok := inf.Get(ns, "churn")
			return ok && strings.HasPrefix(got.Data["v"], fmt.Sprintf("%04d-", i))
		}
	}
	update(0) // the connection's buffers, the watch's first event
	eventually(t, "the first update cached", cached(0))
	before := liveHeap()
	for i := 1; i <= 600; i++ {
		update(i)
	}
	eventually(t, "the last update cached", cached(600))
	grew := int64(liveHeap()) - int64(before)
	t.Logf("the live heap grew by %d bytes", grew)
	if grew > 2<<20 {
		t.Errorf("after 600 updates of 16 KiB fresh values, the live heap grew by %.1f MiB; want at most 2", float64(grew)/(1<<20))
	}
}

// liveHeap is the heap that the garbage collector found live, after two
// collections.
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

package kctl

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kctl-dev/kctl/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
)

// Regression (issue 24, item 5): a cache scoped to 200 namespaces, one
// watch each, saw 64 KiB ConfigMaps created, updated twice and deleted in
// every namespace. Each watch kept a frame buffer as large as its largest
// event, so the live heap stayed 18 MiB above where it started once every
// object was gone. Now kctl keeps no frame buffer: what remains is HTTP/2's
// (golang.org/x/net/http2 keeps each open stream's last, partly read data
// chunk, at most 16 KiB whatever the objects' size: 3.1 MiB here), plus
// noise. Measured: +18.0 MiB before, +4.0 MiB after.
func TestInformer_ChurnOf64KiBObjectsIn200Namespaces_HeapReturns(t *testing.T) {
	cfg := testConfig(t)
	if !controlplane.InOwnProcess(t) {
		return // a heap bound: measured where no other test's memory is live
	}
	checkNoCacheLeaks(t)
	const namespaces = 200
	// one random name, numbered: 200 of testNamespace's could collide
	base := testNamespace(t, cfg)
	var nss []string
	for n := range namespaces {
		ns := fmt.Sprint(base, "-", n)
		body := fmt.Sprintf(`{"metadata":{"name":%q}}`, ns)
		code, resp := testRawRequest(t, cfg, "POST", "/api/v1/namespaces", body)
		if code != http.StatusCreated {
			t.Fatalf("creating namespace %s: %d %s", ns, code, resp)
		}
		nss = append(nss, ns)
	}
	conn := mustConn(t, cfg)
	c := NewCache(conn, CacheOptions{})
	if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: nss}); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	var deleted atomic.Int64
	inf.AddHandler(func(e Event[corev1.ConfigMap]) {
		if e.Type == Deleted {
			deleted.Add(1)
		}
	})
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	big := func(ns string, v int) *corev1.ConfigMap {
		cm := newCM(ns, "big", "")
		cm.Data["v"] = fmt.Sprint(v, strings.Repeat("x", 64<<10))
		return cm
	}
	var writers sync.WaitGroup
	next := make(chan string)
	for range 8 {
		writers.Go(func() {
			for ns := range next {
				cm := big(ns, 0)
				if err := cms.Create(t.Context(), cm); err != nil {
					t.Error(err)
					continue
				}
				for v := range 2 {
					cm.Data = big(ns, v+1).Data
					if err := cms.Update(t.Context(), cm); err != nil {
						t.Error(err)
					}
				}
				if err := cms.Delete(t.Context(), ns, "big"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, ns := range nss {
		next <- ns
	}
	close(next)
	writers.Wait()
	eventually(t, "every delete seen", func() bool { return deleted.Load() == namespaces })
	after := liveHeap()
	grew := float64(int64(after)-int64(before)) / (1 << 20)
	t.Logf("live heap: %.1f MiB after sync, %.1f MiB after the churn (%+.1f MiB)",
		float64(before)/(1<<20), float64(after)/(1<<20), grew)
	// HTTP/2's chunks, and 2 MiB for the rest
	limit := float64(namespaces*16<<10)/(1<<20) + 2
	if grew > limit {
		t.Errorf("after the churn the live heap stayed %.1f MiB above where it started, want at most %.1f", grew, limit)
	}
}

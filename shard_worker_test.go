package kctl

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With the Manager's ownsKey hook set (as Shard sets it), a controller runs
// without leading, reconciles only the keys the hook owns, skips the
// others (counted on the metrics page), reports an owned key in flight
// (inFlight) while its reconcile runs, and on replayKeys reconciles the
// cached keys it owns from then on.
func TestShardWorker_OwnsHook_SkipsKeysNotOwnedAndReportsInFlight(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var mine sync.Map // name -> true: owned
	mine.Store("a", true)
	mgr.ownsKey = func(k Key) bool {
		_, ok := mine.Load(k.Name)
		return ok
	}
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	c := NewController(mgr, "owned-keys", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		mu.Lock()
		seen[cm.Name]++
		mu.Unlock()
		if cm.Name == "a" {
			<-release
		}
		return Result{}, nil
	})
	c.MaxConcurrentReconciles(2) // b is taken while a runs
	var released atomic.Bool
	defer func() {
		if !released.Load() {
			close(release)
		}
	}()
	startManager(t, mgr)
	cms := ClientFor[corev1.ConfigMap](mgr)
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cms.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	named := mgr.byName["owned-keys"]
	isA := func(k Key) bool { return k.Name == "a" }
	eventually(t, "a in flight", func() bool { return named.inFlight(isA) })
	eventually(t, "b skipped", func() bool {
		page := scrapeMetrics(t, mgr.metrics.Handler())
		return strings.Contains(page, `kctl_shard_keys_skipped_total{controller="owned-keys"} 1`)
	})
	released.Store(true)
	close(release)
	eventually(t, "a done", func() bool { return !named.inFlight(isA) })
	mu.Lock()
	if seen["b"] != 0 {
		t.Errorf("b, not owned, was reconciled %d times", seen["b"])
	}
	mu.Unlock()
	mine.Store("b", true)
	named.replayKeys(func(k Key) bool { return k.Name == "b" })
	eventually(t, "b reconciled once owned", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["b"] == 1
	})
}

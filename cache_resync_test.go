package kctl

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 7: ResyncFor sets one type's resync, jittered, and
// replaces the Cache's default for it.
func TestResyncFor_SetsOneTypesPeriodWithJitter(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{Cache: CacheOptions{Resync: time.Hour}})
	if err := ResyncFor[corev1.ConfigMap](mgr.Cache(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := ResyncFor[corev1.Secret](mgr.Cache(), 0); err != nil {
		t.Fatal(err)
	}
	secrets, err := InformerFor[corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if secrets.resync != 0 {
		t.Errorf("Secrets resync every %v, want never (ResyncFor 0)", secrets.resync)
	}
	pods, err := InformerFor[corev1.Pod](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if pods.resync < time.Hour || pods.resync > time.Hour+6*time.Minute {
		t.Errorf("Pods resync every %v, want the default hour stretched by at most 10 %%", pods.resync)
	}
	var resyncs atomic.Int32
	NewController(mgr, "resync", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		if tr, _ := TriggerFrom(ctx); tr.Cause == "resync" {
			resyncs.Add(1)
		}
		return Result{}, nil
	})
	cms := ClientFor[corev1.ConfigMap](mgr)
	startManager(t, mgr)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two resyncs of the ConfigMap", func() bool { return resyncs.Load() >= 2 })
}

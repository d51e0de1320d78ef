package kctl

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 11: with ReaderFailOnMissingInformer a cached read of a
// type the cache does not watch is an error, not a new informer.
func TestCache_ReaderFailOnMissingInformer_ReadOfAnUnwatchedTypeFails(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{Cache: CacheOptions{ReaderFailOnMissingInformer: true}})
	secrets := ClientFor[corev1.Secret](mgr)
	cms := ClientFor[corev1.ConfigMap](mgr)
	if _, err := InformerFor[corev1.ConfigMap](mgr.Cache()); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	ctx := t.Context()

	_, err := secrets.Get(ctx, ns, "s")
	if !errors.Is(err, ErrNotCached) {
		t.Fatalf("cached Get of an unwatched type = %v, want ErrNotCached", err)
	}
	for _, want := range []string{"secrets/v1", "ReaderFailOnMissingInformer", "kctl.InformerFor", "Uncached()"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := secrets.List(ctx, ListOptions{Namespace: ns}); !errors.Is(err, ErrNotCached) {
		t.Errorf("cached List of an unwatched type = %v, want ErrNotCached", err)
	}
	mgr.cache.mu.Lock()
	n := len(mgr.cache.informers)
	mgr.cache.mu.Unlock()
	if n != 1 {
		t.Errorf("the cache has %d informers after the failed reads, want 1 (ConfigMaps)", n)
	}
	// A watched type reads as usual.
	if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, ns, "c"); err != nil {
		t.Errorf("cached Get of a watched type: %v", err)
	}
}

package kctl

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every informer of the Manager's cache is on its metrics page once, also
// one made only by a cached client read (no controller, no source): the
// README promises kctl_cache_objects, kctl_cache_bytes and
// kctl_cache_undecodable_objects per cached resource.
func TestManager_TypeCachedOnlyByAClientRead_IsOnTheMetricsPageOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	uncached := NewClient[corev1.Secret](mustConn(t, cfg))
	for _, name := range []string{"a", "b"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": "v"}}
		if err := uncached.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	mgr := testManager(t, cfg, ns, Options{})
	startManager(t, mgr)
	secrets := ClientFor[corev1.Secret](mgr)
	if _, err := secrets.Get(t.Context(), ns, "a"); err != nil {
		t.Fatalf("cached Get(%s, a): %v", ns, err)
	}
	list, err := secrets.List(t.Context(), ListOptions{Namespace: ns})
	if err != nil {
		t.Fatalf("cached List(%s): %v", ns, err)
	}

	body := scrapeMetrics(t, mgr.metrics.Handler())
	page := samples(body)
	const r = `{resource="secrets/v1"}`
	if got, want := page["kctl_cache_objects"+r], strconv.Itoa(len(list)); got != want {
		t.Errorf("kctl_cache_objects%s = %q, want %s (what the cached List returned)", r, got, want)
	}
	if got := value(t, page, "kctl_cache_bytes"+r); got <= 0 {
		t.Errorf("kctl_cache_bytes%s = %v, want the encoded size of %d Secrets", r, got, len(list))
	}
	if got := page["kctl_cache_undecodable_objects"+r]; got != "0" {
		t.Errorf("kctl_cache_undecodable_objects%s = %q, want 0", r, got)
	}
	for _, family := range []string{"kctl_cache_objects", "kctl_cache_bytes", "kctl_cache_undecodable_objects"} {
		if n := strings.Count(body, "\n"+family+r+" "); n != 1 {
			t.Errorf("%s%s is on the page %d times, want once:\n%s", family, r, n, body)
		}
	}
}

// A controller's own type that a client also reads, and a source's type,
// are each on the page once: the cache registers an informer when it makes
// it, whoever asks first.
func TestManager_TypeOfAControllerAndOfAClientRead_IsOnTheMetricsPageOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	reads := ClientFor[corev1.ConfigMap](mgr)
	c := NewController(mgr, "cms", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	Owns[corev1.Secret](c)
	startManager(t, mgr)
	if _, err := reads.List(t.Context(), ListOptions{Namespace: ns}); err != nil {
		t.Fatalf("cached List(%s): %v", ns, err)
	}
	body := scrapeMetrics(t, mgr.metrics.Handler())
	for _, r := range []string{`{resource="configmaps/v1"}`, `{resource="secrets/v1"}`} {
		for _, family := range []string{"kctl_cache_objects", "kctl_cache_bytes", "kctl_cache_undecodable_objects"} {
			if n := strings.Count(body, "\n"+family+r+" "); n != 1 {
				t.Errorf("%s%s is on the page %d times, want once:\n%s", family, r, n, body)
			}
		}
	}
}

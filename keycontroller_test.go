package kctl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 2: a controller of keys that name no object, fed by
// Watches, FromChannel and Enqueue, retried with backoff and counted.
func TestKeyController_ReconcilesKeysThatNameNoObject(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	pods := ClientFor[corev1.Pod](mgr)
	var mu sync.Mutex
	runs := map[string][]string{} // key -> causes
	failed := false
	c := NewKeyController(mgr, "summary", func(ctx context.Context, k Key) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		defer mu.Unlock()
		runs[k.String()] = append(runs[k.String()], tr.Cause)
		if k.Name == "flaky" && !failed {
			failed = true
			return Result{}, errors.New("not yet")
		}
		return Result{}, nil
	})
	summary := Key{Namespace: ns, Name: "pod-summary"}
	Watches(c, func(p *corev1.Pod) []Key { return []Key{summary} })
	ticks := make(chan string, 1)
	FromChannel(c, ticks, nil, func(s string) []Key { return []Key{{Name: s}} })
	c.Enqueue(Key{Name: "flaky"}) // before Start: kept until the controller runs
	startManager(t, mgr)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	if err := pods.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	ticks <- "external"
	causes := func(k string) []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), runs[k]...)
	}
	eventually(t, "every key reconciled", func() bool {
		return len(causes(summary.String())) > 0 && len(causes("external")) > 0 && len(causes("flaky")) >= 2
	})
	if got := causes(summary.String()); !strings.Contains(strings.Join(got, " "), "mapped") {
		t.Errorf("causes of %s = %v, want mapped", summary, got)
	}
	if got := causes("external"); got[0] != "channel" {
		t.Errorf("causes of external = %v, want channel", got)
	}
	if got := causes("flaky"); got[0] != "manual" || got[1] != "retry" {
		t.Errorf("causes of flaky = %v, want manual, then retry", got)
	}
	page := scrapeMetrics(t, mgr.metrics.Handler())
	for _, want := range []string{
		`controller_runtime_reconcile_total{controller="summary",result="error"} 1`,
		`workqueue_retries_total{controller="summary",name="summary"} 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics page lacks %s", want)
		}
	}
}

func TestKeyController_Owns_IsAnErrorFromStart(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	c := NewKeyController(mgr, "keys", func(ctx context.Context, k Key) (Result, error) { return Result{}, nil })
	Owns[corev1.Pod](c)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := mgr.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "Owns on a controller of keys") {
		t.Errorf("Start = %v, want Owns on a key controller named", err)
	}
}

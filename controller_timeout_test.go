package kctl

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 1: WithReconcileTimeout ends a reconcile's context, counts
// it in controller_runtime_reconcile_timeouts_total, and retries the key.
func TestController_ReconcileTimeout_EndsTheContextCountsAndRetries(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	mgr := testManager(t, cfg, ns, Options{Logger: logger})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	var causes []string
	var ctxErr error
	c := NewController(mgr, "timeout", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		causes = append(causes, tr.Cause)
		first := len(causes) == 1
		mu.Unlock()
		if !first {
			return Result{}, nil
		}
		<-ctx.Done() // the timeout ends it
		mu.Lock()
		ctxErr = ctx.Err()
		mu.Unlock()
		return Result{}, nil
	})
	c.WithReconcileTimeout(100 * time.Millisecond)
	startManager(t, mgr)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the retry after the timeout", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(causes) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(ctxErr, context.DeadlineExceeded) {
		t.Errorf("reconcile's ctx.Err() = %v, want DeadlineExceeded", ctxErr)
	}
	if causes[1] != "retry" {
		t.Errorf("the reconcile after the timeout has trigger %q, want retry", causes[1])
	}
	page := scrapeMetrics(t, mgr.metrics.Handler())
	want := `controller_runtime_reconcile_timeouts_total{controller="timeout"} 1`
	if !strings.Contains(page, want) {
		t.Errorf("metrics page lacks %s:\n%s", want, onlyFamilies(page, "controller_runtime_reconcile_t"))
	}
	lines := logs.linesEventually(t, "ran past its timeout of 100ms (WithReconcileTimeout)", 1)
	if !strings.Contains(lines[0], "will retry") {
		t.Errorf("the timeout's log line is not a retry: %s", lines[0])
	}
}

func TestController_ReconcileTimeout_NegativeIsAnErrorFromStart(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	c := NewController(mgr, "neg", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	c.WithReconcileTimeout(-time.Second)
	err := mgr.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "WithReconcileTimeout(-1s) must not be negative") {
		t.Errorf("Start = %v, want the negative timeout named", err)
	}
}

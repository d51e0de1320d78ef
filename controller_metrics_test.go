package kctl

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 33, item 9: the metrics page counts what controller-runtime
// counts. A reconcile that panics is counted in
// controller_runtime_reconcile_panics_total and retried as an error; one
// that returns a Terminal error is counted in
// controller_runtime_terminal_reconcile_errors_total and not retried.
// Both are errors of reconcile_errors_total, as in controller-runtime.
func TestControllerMetrics_PanicAndTerminal_AreCountedOnThePage(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	causes := map[string][]string{}
	NewController(mgr, "counted", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		causes[cm.Name] = append(causes[cm.Name], tr.Cause)
		n := len(causes[cm.Name])
		mu.Unlock()
		switch {
		case cm.Name == "panics" && n == 1:
			panic("boom")
		case cm.Name == "terminal":
			return Result{}, Terminal(errors.New("bad spec"))
		}
		return Result{}, nil
	})
	startManager(t, mgr)
	ctx := t.Context()
	reconciled := func(name string, n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(causes[name]) >= n
		}
	}
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// Once the controller runs, each object below is queued by its one
	// event only, so the counts are exact.
	create("ready")
	eventually(t, "the controller to run", reconciled("ready", 1))
	create("panics")
	create("terminal")
	eventually(t, "the panic retried", reconciled("panics", 2))
	eventually(t, "the terminal error", reconciled("terminal", 1))

	want := map[string]int{
		`controller_runtime_reconcile_panics_total{controller="counted"}`:                 1,
		`controller_runtime_terminal_reconcile_errors_total{controller="counted"}`:        1,
		`controller_runtime_reconcile_errors_total{controller="counted"}`:                 2,
		`controller_runtime_reconcile_total{controller="counted",result="error"}`:         2,
		`controller_runtime_reconcile_total{controller="counted",result="success"}`:       2,
		`controller_runtime_reconcile_timeouts_total{controller="counted"}`:               0,
		`controller_runtime_reconcile_total{controller="counted",result="requeue"}`:       0,
		`controller_runtime_reconcile_total{controller="counted",result="requeue_after"}`: 0,
	}
	// Each result is counted after its reconcile returns: wait for the
	// last ones, then read the page once.
	const errs = `controller_runtime_reconcile_total{controller="counted",result="error"}`
	const oks = `controller_runtime_reconcile_total{controller="counted",result="success"}`
	var page string
	eventually(t, "two errors and two successes counted", func() bool {
		page = scrapeMetrics(t, mgr.metrics.Handler())
		got := samples(page)
		return got[errs] == "2" && got[oks] == "2"
	})
	got := samples(page)
	for series, v := range want {
		if s, ok := got[series]; !ok || s != strconv.Itoa(v) {
			t.Errorf("%s = %q, want %d", series, s, v)
		}
	}
	if t.Failed() {
		t.Logf("the page's counters:\n%s", onlyFamilies(page, "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors", "controller_runtime_terminal", "controller_runtime_reconcile_panics"))
	}
	mu.Lock()
	defer mu.Unlock()
	if got := causes["panics"]; len(got) != 2 || got[1] != "retry" {
		t.Errorf("triggers of the panicking key = %v, want a first one, then retry", got)
	}
	if got := causes["terminal"]; len(got) != 1 {
		t.Errorf("triggers of the terminal key = %v, want one: a Terminal error is not retried", got)
	}
}

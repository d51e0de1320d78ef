package kctl

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Issue 33, item 10: a controller waits for its caches once, whichever
// of its two runnables (the leader's, every replica's) runs it, and says
// so once. A source whose CRD is not installed keeps it waiting, so both
// runnables are still waiting when the Manager stops: each used to log
// the wait.
func TestController_WaitsForItsCaches_LogsItOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	mgr := testManager(t, cfg, ns, Options{Logger: logger})
	c := NewController(mgr, "waits", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		return Result{}, nil
	})
	Watches(c, func(*notInstalledGizmo) []Key { return nil })
	stop := startManager(t, mgr)
	const waiting = "controller waiting for its caches to sync"
	logs.linesEventually(t, waiting, 1)
	if err := stop(); err != nil {
		t.Fatalf("Manager.Start returned %v", err)
	}
	// Both runnables have returned: what they logged is all there.
	if lines := logs.lines(waiting); len(lines) != 1 {
		t.Errorf("the wait for the caches is logged %d times, want once:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if lines := logs.lines("controller started"); len(lines) != 0 {
		t.Errorf("the controller started without its caches:\n%s", lines)
	}
}

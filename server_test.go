package kctl

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths: every server the
// Manager runs reports (in its "serving" log line) a read and a write
// timeout, and each answers only on its own paths (kctl/webhook's and
// kctl/debug's servers: in their packages' tests).
func TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	logs := &logBuffer{}
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	metricsAddr, healthAddr, userAddr := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	for _, err := range []error{
		mgr.ServeMetrics(metricsAddr),
		mgr.ServeHealth(healthAddr),
		mgr.Add(HTTPServer("user", userAddr, http.NotFoundHandler())),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, mgr)
	lines := logs.linesEventually(t, `msg="serving `, 3)
	timeouts := regexp.MustCompile(`readTimeout=([0-9][^ ]*) writeTimeout=([0-9][^ ]*)`)
	for _, l := range lines {
		m := timeouts.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("a server without timeouts: %s", l)
			continue
		}
		for _, v := range m[1:] {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				t.Errorf("a server with timeout %q: %s", v, l)
			}
		}
	}

	for _, tc := range []struct {
		addr, path string
		code       int
		body       string
	}{
		{metricsAddr, "/metrics", 200, "go_goroutines"},
		{metricsAddr, "/metrics/anything", 404, ""},
		{metricsAddr, "/metricsx", 404, ""},
		{metricsAddr, "/", 404, ""},
		{healthAddr, "/readyz", 200, "ok"},
		{healthAddr, "/metrics", 404, ""},
		{userAddr, "/", 404, ""},
	} {
		if code, body := getPage(t, tc.addr, tc.path); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", tc.path, code, body, tc.code, tc.body)
		}
	}
}

// TestManager_ServingPackagesAPI_MisuseAndDrainDeadline: what kctl/webhook
// uses of a Manager. A mistake reported with ReportMisuse is what Start
// returns, starting nothing; DrainDeadline is zero until the Manager's
// context ends, then ShutdownTimeout less its reserve after that.
func TestManager_ServingPackagesAPI_MisuseAndDrainDeadline(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	bad := testManager(t, cfg, ns, Options{})
	bad.ReportMisuse(errors.New("kctl: the widget hook is registered twice"))
	if err := bad.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("Start after ReportMisuse = %v, want the mistake", err)
	}

	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: 10 * time.Second})
	if d := mgr.DrainDeadline(); !d.IsZero() {
		t.Errorf("DrainDeadline before Start = %v, want zero", d)
	}
	type seen struct{ at, deadline time.Time }
	running := make(chan struct{})
	got := make(chan seen, 1)
	err := mgr.Add(Runnable{Name: "drainer", Run: func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		got <- seen{time.Now(), mgr.DrainDeadline()}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := startManager(t, mgr)
	<-running
	if d := mgr.DrainDeadline(); !d.IsZero() {
		t.Errorf("DrainDeadline while running = %v, want zero", d)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := <-got
	// reserve = min(10s/5, 2s) = 2s: the deadline is 8s after the end.
	if left := s.deadline.Sub(s.at); left < 7*time.Second || left > 8500*time.Millisecond {
		t.Errorf("DrainDeadline after the context ended = %v from then, want about 8s", left)
	}
}

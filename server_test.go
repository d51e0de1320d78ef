package kctl

import (
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths: every server the
// Manager runs (kctl/webhook's and kctl/debug's: in their packages) reports (in its "serving" log line) a read and a write timeout, and
// each answers only on its own paths.
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

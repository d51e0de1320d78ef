package kctl

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/certs"
)

// TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths: every server kctl
// runs reports (in its "serving" log line) a read and a write timeout, and
// each answers only on its own paths.
func TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	logs := &logBuffer{}
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	metricsAddr, healthAddr, pprofAddr, userAddr := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	for _, err := range []error{
		mgr.ServeMetrics(metricsAddr),
		mgr.ServeHealth(healthAddr),
		mgr.ServePprof(pprofAddr),
		mgr.Add(HTTPServer("user", userAddr, http.NotFoundHandler())),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	certDir := t.TempDir()
	ca, err := certs.NewCA("kctl server test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteServing(certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.ServeWebhooks(freeLoopbackAddr(t), certDir); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	lines := logs.linesEventually(t, `msg="serving `, 5)
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
		{pprofAddr, "/debug/pprof/", 200, "heap"},
		{pprofAddr, "/debug/pprof/heap?debug=1", 200, "heap profile"},
		{pprofAddr, "/debug/pprof/goroutine?debug=2", 200, "goroutine "},
		{pprofAddr, "/debug/pprof/nope", 404, "no profile named nope"},
		{pprofAddr, "/metrics", 404, ""},
	} {
		if code, body := getPage(t, tc.addr, tc.path); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	code, body := getPage(t, pprofAddr, "/debug/pprof/profile?seconds=1")
	if code != 200 || !bytes.HasPrefix([]byte(body), []byte{0x1f, 0x8b}) {
		t.Errorf("GET a 1s CPU profile = %d, %d bytes, want 200 and a gzipped profile", code, len(body))
	}
	rec := httptest.NewRecorder()
	http.DefaultServeMux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
	if rec.Code != 404 {
		t.Errorf("http.DefaultServeMux serves /debug/pprof/ (%d): kctl must not register on it", rec.Code)
	}
}

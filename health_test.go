package kctl

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func healthProbe(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

func TestHealth_Probes_ReportEveryCheckLikeKubeAPIServer(t *testing.T) {
	var synced atomic.Bool
	h := newHealthChecks()
	h.add("ping", false, func(*http.Request) error { return nil })
	h.add("cache-sync", true, func(*http.Request) error {
		if !synced.Load() {
			return errors.New("widgets.example.com/v1 is not installed on the API server:\napply its CRD")
		}
		return nil
	})
	h.add("leader", true, func(*http.Request) error { return nil })
	h.add("stuck", false, func(*http.Request) error { return nil })
	h.add("stuck", false, func(*http.Request) error { return errors.New("worker stuck") }) // replaces
	h.add("ok-again", false, func(*http.Request) error { return nil })

	for i, step := range []struct {
		sync bool
		path string
		code int
		body string
	}{
		{false, "/readyz", 503, "[-]cache-sync failed: reason withheld\n[+]leader ok\nreadyz check failed\n"},
		{false, "/readyz?verbose", 503, "[-]cache-sync failed: widgets.example.com/v1 is not installed on the API server: apply its CRD\n[+]leader ok\nreadyz check failed\n"},
		{false, "/readyz?exclude=cache-sync", 200, "ok"},
		{false, "/readyz?exclude=cache-sync&verbose", 200, "[+]cache-sync excluded: ok\n[+]leader ok\nreadyz check passed\n"},
		{false, "/readyz/leader", 200, "ok"},
		{false, "/readyz/cache-sync", 503, "[-]cache-sync failed: reason withheld\n"},
		{false, "/readyz/cache-sync?verbose", 503, "[-]cache-sync failed: widgets.example.com/v1 is not installed on the API server: apply its CRD\n"},
		{false, "/readyz/nope", 404, "kctl: no check named nope\n"},
		{false, "/readyz/ping", 404, "kctl: no check named ping\n"}, // a liveness check, not under /readyz
		{true, "/readyz", 200, "ok"},
		{true, "/readyz?verbose", 200, "[+]cache-sync ok\n[+]leader ok\nreadyz check passed\n"},
		{true, "/healthz", 503, "[+]ping ok\n[-]stuck failed: reason withheld\n[+]ok-again ok\nhealthz check failed\n"},
		{true, "/healthz?exclude=stuck", 200, "ok"},
		{true, "/healthz/ping", 200, "ok"},
		{true, "/livez", 404, "404 page not found\n"},
	} {
		synced.Store(step.sync)
		if code, body := healthProbe(t, h.handler(), step.path); code != step.code || body != step.body {
			t.Errorf("step %d: GET %s (synced=%v) = %d %q, want %d %q", i, step.path, step.sync, code, body, step.code, step.body)
		}
	}
}

func TestHealth_NoChecks_OK(t *testing.T) {
	h := newHealthChecks()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := healthProbe(t, h.handler(), path); code != 200 || body != "ok" {
			t.Errorf("GET %s with no checks = %d %q, want 200 \"ok\"", path, code, body)
		}
	}
}

func TestHealth_CheckThatAddsACheck_DoesNotDeadlock(t *testing.T) {
	h := newHealthChecks()
	h.add("adder", true, func(*http.Request) error { // checks run without h.mu held
		h.add("late", true, func(*http.Request) error { return nil })
		return nil
	})
	if code, _ := healthProbe(t, h.handler(), "/readyz"); code != 200 {
		t.Errorf("GET /readyz = %d, want 200", code)
	}
	if code, _ := healthProbe(t, h.handler(), "/readyz/late"); code != 200 {
		t.Errorf("GET /readyz/late = %d, want 200", code)
	}
}

// probeWidget's CRD is installed by TestManager_Readyz_503NamingMissingCRDThen200AfterSync.
type probeWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]string `json:"spec,omitempty"`
}

var _ = Declare[probeWidget](Resource{Group: "probe.metricstest.kctl.dev", Version: "v1", Kind: "ProbeWidget", Namespaced: true})

const probeWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"probewidgets.probe.metricstest.kctl.dev"},
 "spec":{"group":"probe.metricstest.kctl.dev","scope":"Namespaced",
  "names":{"plural":"probewidgets","singular":"probewidget","kind":"ProbeWidget","listKind":"ProbeWidgetList"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func TestManager_Readyz_503NamingMissingCRDThen200AfterSync(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	defer testCRDAbsent(t, cfg, ns, "probe.metricstest.kctl.dev", "v1", "probewidgets")() // not t.Cleanup: t.Context() has ended by then

	healthAddr := freeLoopbackAddr(t)
	mgr := testManager(t, cfg, ns, Options{})
	if err := mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	NewController[probeWidget](mgr, "probe-widgets", func(context.Context, *probeWidget) (Result, error) { return Result{}, nil })
	startManager(t, mgr)

	pollPage(t, healthAddr, "/readyz?verbose", "503 naming the missing CRD", func(code int, body string) bool {
		return code == 503 && strings.Contains(body, "probewidgets.probe.metricstest.kctl.dev/v1") && strings.Contains(body, "not installed")
	})
	if code, body := getPage(t, healthAddr, "/healthz"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz while not ready = %d %q, want 200 ok: liveness must not follow readiness", code, body)
	}
	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", probeWidgetCRD); code != 201 {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	pollPage(t, healthAddr, "/readyz", "200 ok after the cache synced", func(code int, body string) bool {
		return code == 200 && body == "ok"
	})
	if code, body := getPage(t, healthAddr, "/readyz?verbose"); code != 200 || !strings.Contains(body, "[+]") {
		t.Errorf("GET /readyz?verbose = %d %q, want 200 listing the checks", code, body)
	}
}

package health

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func healthProbe(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

func TestHealth_Probes_ReportEveryCheckLikeKubeAPIServer(t *testing.T) {
	var synced atomic.Bool
	h := &Checks{}
	h.Add("ping", false, func(*http.Request) error { return nil })
	h.Add("cache-sync", true, func(*http.Request) error {
		if !synced.Load() {
			return errors.New("widgets.example.com/v1 is not installed on the API server:\napply its CRD")
		}
		return nil
	})
	h.Add("leader", true, func(*http.Request) error { return nil })
	h.Add("stuck", false, func(*http.Request) error { return nil })
	h.Add("stuck", false, func(*http.Request) error { return errors.New("worker stuck") }) // replaces
	h.Add("ok-again", false, func(*http.Request) error { return nil })

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
		if code, body := healthProbe(t, h.Handler(), step.path); code != step.code || body != step.body {
			t.Errorf("step %d: GET %s (synced=%v) = %d %q, want %d %q", i, step.path, step.sync, code, body, step.code, step.body)
		}
	}
}

func TestHealth_NoChecks_OK(t *testing.T) {
	h := &Checks{}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := healthProbe(t, h.Handler(), path); code != 200 || body != "ok" {
			t.Errorf("GET %s with no checks = %d %q, want 200 \"ok\"", path, code, body)
		}
	}
}

func TestHealth_CheckThatAddsACheck_DoesNotDeadlock(t *testing.T) {
	h := &Checks{}
	h.Add("adder", true, func(*http.Request) error { // checks run without h.mu held
		h.Add("late", true, func(*http.Request) error { return nil })
		return nil
	})
	if code, _ := healthProbe(t, h.Handler(), "/readyz"); code != 200 {
		t.Errorf("GET /readyz = %d, want 200", code)
	}
	if code, _ := healthProbe(t, h.Handler(), "/readyz/late"); code != 200 {
		t.Errorf("GET /readyz/late = %d, want 200", code)
	}
}

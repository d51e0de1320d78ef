package kctl

import (
	"net/http"
	"slices"
	"strings"
)

// ServeHealth serves the probes /healthz and /readyz on addr while the
// Manager runs, e.g. "127.0.0.1:8081". /readyz is 200 once every
// controller's cache has synced and every AddReadyCheck passes. It is Add of
// a Runnable named "health", so call it before Start; "" adds nothing.
// Probes are off unless you call it.
func (m *Manager) ServeHealth(addr string) error {
	if addr == "" {
		return nil
	}
	return m.Add(m.server("health", addr, m.health.handler()))
}

// handler serves /healthz, /readyz, /healthz/<check> and /readyz/<check>;
// any other path is 404.
func (h *health) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoint, one, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if endpoint != "readyz" && endpoint != "healthz" {
			http.NotFound(w, r)
			return
		}
		h.mu.Lock()
		checks := slices.DeleteFunc(slices.Clone(h.checks), func(c healthCheck) bool {
			return c.readiness != (endpoint == "readyz") || one != "" && c.name != one
		})
		h.mu.Unlock()
		if one != "" && len(checks) == 0 {
			http.Error(w, "kctl: no check named "+one, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		q := r.URL.Query()
		failed := false
		b := ""
		for _, c := range checks {
			if one == "" && slices.Contains(q["exclude"], c.name) {
				b += "[+]" + c.name + " excluded: ok\n"
			} else if err := c.check(r); err != nil {
				failed = true
				b += "[-]" + c.name + " failed: " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"
			} else {
				b += "[+]" + c.name + " ok\n"
			}
		}
		if _, verbose := q["verbose"]; failed {
			w.WriteHeader(http.StatusServiceUnavailable)
			if one == "" {
				b += endpoint + " check failed\n"
			}
		} else if verbose && one == "" {
			b += endpoint + " check passed\n"
		} else {
			b = "ok"
		}
		w.Write([]byte(b))
	})
}

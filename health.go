package kctl

import (
	"net/http"
	"slices"
	"strings"
	"sync"
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

// health runs the Manager's probe checks and serves them like kube-apiserver:
//
//	GET /readyz          200 "ok", or 503 listing every check, [-] on the failing ones
//	GET /readyz?verbose  every check with [+] or [-], also when all pass
//	GET /readyz/<check>  one check: 200 "ok", or 503 with its error
//	?exclude=<check>     skip a check (repeatable)
//
// and the same under /healthz for liveness checks. Errors are shown, so serve
// it on loopback or a pod-internal address. The zero value is not usable;
// call newHealth. It is safe for concurrent use. Checks run on the request's
// goroutine, in the order added, without h.mu held; they must honour r.Context().
type health struct {
	mu     sync.Mutex
	checks []healthCheck // in the order added; names are unique
}

type healthCheck struct {
	name      string
	readiness bool
	check     func(r *http.Request) error
}

func newHealth() *health { return &health{} }

// add registers a readiness (/readyz) or liveness (/healthz) check. Adding a
// name again replaces the earlier check.
func (h *health) add(name string, readiness bool, check func(r *http.Request) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := healthCheck{name, readiness, check}
	if i := slices.IndexFunc(h.checks, func(c healthCheck) bool { return c.name == name }); i >= 0 {
		h.checks[i] = c
	} else {
		h.checks = append(h.checks, c)
	}
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

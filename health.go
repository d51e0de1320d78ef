package kctl

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// health runs the Manager's probe checks and serves them like kube-apiserver:
//
//	GET /readyz          200 "ok", or 503 listing every check, [-] on the failing ones
//	GET /readyz?verbose  every check with [+] or [-], also when all pass
//	GET /readyz/<check>  one check: 200 "ok", or 503 with its error
//	?exclude=<check>     skip a check (repeatable)
//
// and the same under /healthz for liveness checks. Readiness checks say
// whether to send work to this process (caches synced); liveness checks say
// whether to restart it. A failing check's error is shown on the page, so it
// can say what to do ("widgets.example.com/v1 is not installed: apply its
// CRD"); serve the page on loopback or a pod-internal address.
//
// The zero value is not usable; call newHealth. add and the handler are safe
// for concurrent use. Checks run on the request's goroutine, in the order
// they were added, without h.mu held; a check must honour r.Context().
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

// add registers a check under name: a readiness check (/readyz) when
// readiness is true, else a liveness check (/healthz). Adding a name again
// replaces the earlier check.
func (h *health) add(name string, readiness bool, check func(r *http.Request) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := healthCheck{name: name, readiness: readiness, check: check}
	if i := slices.IndexFunc(h.checks, func(c healthCheck) bool { return c.name == name }); i >= 0 {
		h.checks[i] = c
		return
	}
	h.checks = append(h.checks, c)
}

// handler serves /healthz and /readyz (and one check at /healthz/<name>,
// /readyz/<name>); any other path is 404.
func (h *health) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoint, one, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		var readiness bool
		switch endpoint {
		case "readyz":
			readiness = true
		case "healthz":
		default:
			http.NotFound(w, r)
			return
		}
		h.mu.Lock()
		var checks []healthCheck
		for _, c := range h.checks {
			if c.readiness == readiness && (one == "" || c.name == one) {
				checks = append(checks, c)
			}
		}
		h.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if one != "" {
			h.serveOne(w, r, one, checks)
			return
		}
		excluded := r.URL.Query()["exclude"]
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if slices.Contains(excluded, c.name) {
				b.WriteString("[+]" + c.name + " excluded: ok\n")
				continue
			}
			if err := c.check(r); err != nil {
				failed = true
				b.WriteString("[-]" + c.name + " failed: " + oneLine(err.Error()) + "\n")
				continue
			}
			b.WriteString("[+]" + c.name + " ok\n")
		}
		switch _, verbose := r.URL.Query()["verbose"]; {
		case failed:
			w.WriteHeader(http.StatusServiceUnavailable)
			b.WriteString(endpoint + " check failed\n")
		case verbose:
			b.WriteString(endpoint + " check passed\n")
		default:
			b.Reset()
			b.WriteString("ok")
		}
		w.Write([]byte(b.String()))
	})
}

func (h *health) serveOne(w http.ResponseWriter, r *http.Request, name string, checks []healthCheck) {
	if len(checks) == 0 {
		http.Error(w, "kctl: no check named "+name, http.StatusNotFound)
		return
	}
	if err := checks[0].check(r); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("[-]" + name + " failed: " + oneLine(err.Error()) + "\n"))
		return
	}
	w.Write([]byte("ok"))
}

// oneLine keeps a multi-line error on its check's line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

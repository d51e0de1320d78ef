package kctl

// The Manager's probe checks: the readiness (/readyz) and liveness
// (/healthz) checks it and its parts add, kept in order by name. health.go
// serves them (ServeHealth).

import (
	"net/http"
	"slices"
	"sync"
)

// health runs the Manager's probe checks and serves them like kube-apiserver:
//
//	GET /readyz          200 "ok", or 503 listing every check, [-] on the failing ones
//	GET /readyz?verbose  every check with [+] or [-], also when all pass
//	GET /readyz/<check>  one check: 200 "ok", or 503 with its error
//	?exclude=<check>     skip a check (repeatable)
//
// and the same under /healthz for liveness checks. A failing check's error
// text is shown only with ?verbose (else "reason withheld"), as
// kube-apiserver does; serve it on loopback or a pod-internal address. The zero value is not usable;
// call newHealth. It is safe for concurrent use. Checks run on the request's
// goroutine, in the order added, without h.mu held; they must honour r.Context().
type healthChecks struct {
	mu sync.Mutex
	// checks are in the order added; names are unique.
	checks []healthCheck
}

type healthCheck struct {
	name      string
	readiness bool
	check     func(r *http.Request) error
	// note, if set, is shown after "ok" (health.go's addNoted).
	note func() string
}

func newHealthChecks() *healthChecks { return &healthChecks{} }

// add registers a readiness (/readyz) or liveness (/healthz) check. Adding a
// name again replaces the earlier check.
func (h *healthChecks) add(
	name string,
	readiness bool,
	check func(r *http.Request) error,
) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := healthCheck{name, readiness, check, nil}
	sameName := func(other healthCheck) bool { return other.name == name }
	i := slices.IndexFunc(h.checks, sameName)
	if i >= 0 {
		h.checks[i] = c
	} else {
		h.checks = append(h.checks, c)
	}
}

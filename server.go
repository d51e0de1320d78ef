package kctl

// An extra: the HTTP servers a Manager runs (HTTPServer runnables,
// ServeMetrics; each served by internal/serve), and what the serving
// packages kctl/webhook and kctl/debug use of a Manager: its logger, its
// shutdown's drain deadline, and the mistakes Start returns; UserInfo, who
// sent a request (ServeSecureMetrics, kctl/webhook).

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/kctl-dev/kctl/internal/serve"
)

// HTTPServer returns a Runnable that serves h on addr (e.g. "127.0.0.1:8082")
// while the Manager runs, for endpoints that enqueue keys or report state.
// It logs to the Manager's logger (LoggerFrom of its context). The server
// allows 10 s for a request's headers, 30 s for the whole request, 1 min to
// write the answer, and closes a connection idle for 90 s; an endpoint that
// streams for longer needs a server of its own.
func HTTPServer(name, addr string, h http.Handler) Runnable {
	spec := serve.Spec{
		Name:    name,
		Addr:    addr,
		Handler: h,
		Read:    30 * time.Second,
		Write:   time.Minute,
	}
	run := func(ctx context.Context) error {
		return spec.Serve(ctx, LoggerFrom(ctx))
	}
	return Runnable{Name: name, Run: run}
}

// runnable is s as a Runnable on every replica, logging to m's logger.
func (m *Manager) runnable(s serve.Spec) Runnable {
	run := func(ctx context.Context) error {
		return s.Serve(ctx, m.log)
	}
	return Runnable{Name: s.Name, Run: run}
}

// ServeMetrics serves Prometheus metrics at /metrics on addr while the
// Manager runs, e.g. "127.0.0.1:8080" (":8080" listens on every interface:
// ask for it only in a Pod, and prefer ServeSecureMetrics there). It is Add
// of a Runnable named "metrics", so call it before Start; "" adds nothing,
// so that a flag can turn metrics off. Metrics are off unless you call it.
// Any other path is 404; a scrape has 30 s to be written.
func (m *Manager) ServeMetrics(addr string) error {
	if addr == "" {
		return nil
	}
	return m.Add(m.runnable(m.metricsServer(addr)))
}

// metricsServer serves the page at /metrics only, over plain HTTP. Not
// an http.ServeMux: its pattern matching would link 40 KB into every
// program serving metrics.
func (m *Manager) metricsServer(addr string) serve.Spec {
	page := m.metrics.Handler()
	only := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		page.ServeHTTP(w, r)
	}
	return serve.Spec{
		Name:    "metrics",
		Addr:    addr,
		Handler: http.HandlerFunc(only),
		Read:    10 * time.Second,
		Write:   30 * time.Second,
	}
}

// Logger returns the Manager's logger: Options.Logger, or slog.Default().
// It is LoggerFrom of a runnable's context, for code that logs outside
// one (a server's callbacks, say).
func (m *Manager) Logger() *slog.Logger { return m.log }

// ReportMisuse records err, a mistake in the program's set-up (a
// builder call with a wrong argument, a webhook registered twice), for
// Start to return, joined with the others, without starting anything.
// Once Start has begun it can return none, so it logs err as an error
// instead. Packages that build on a Manager (kctl/webhook) report their
// mistakes so, as kctl's own builder calls do; err reads "kctl: ...",
// naming what is wrong and what to do.
func (m *Manager) ReportMisuse(err error) { m.misuse(err) }

// DrainDeadline returns when, in the Manager's graceful shutdown, work in
// flight is cut off: ShutdownTimeout less its reserve after the
// Manager's context ended (see Start). A runnable that drains after its
// context ends (a server letting its answers finish) stops by then. It
// is the zero time until the Manager's context has ended.
func (m *Manager) DrainDeadline() time.Time {
	m.mu.Lock()
	ctx := m.ctx
	m.mu.Unlock()
	if ctx == nil || ctx.Err() == nil {
		return time.Time{}
	}
	return m.shutdown.drainBy()
}

// UserInfo is who sent a request, as the API server authenticated them:
// authenticationv1.UserInfo's fields. ServeSecureMetrics reads it from a
// TokenReview; kctl/webhook hands it to a webhook's function.
type UserInfo struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

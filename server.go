package kctl

// An extra: the HTTP servers a Manager runs (HTTPServer runnables,
// ServeMetrics; each served by internal/serve), and what the serving
// packages kctl/webhook and kctl/debug use of a Manager: its logger, its
// shutdown's drain deadline, and the mistakes Start returns; UserInfo, who
// sent a request (ServeSecureMetrics, kctl/webhook); ServeHealth, the
// /healthz and /readyz endpoints over the Manager's health checks
// (AddReadyCheck, AddHealthCheck, AddNotedReadyCheck, WithLivenessBound;
// served by internal/health); and ServeSecureMetrics, the metrics page
// over HTTPS for scrapers that the API server authenticates
// (TokenReview) and authorizes (SubjectAccessReview), as kubebuilder
// projects serve it (internal/metricsauth).

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/kctl-dev/kctl/internal/certwatch"
	"github.com/kctl-dev/kctl/internal/metricsauth"
	"github.com/kctl-dev/kctl/internal/serve"
	"k8s.io/client-go/rest"
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
	return m.schedule.DrainBy()
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

// ServeHealth serves the probes /healthz and /readyz on addr while the
// Manager runs, e.g. "127.0.0.1:8081". /readyz is 200 once every
// controller's cache has synced and every AddReadyCheck passes. It is Add of
// a Runnable named "health", so call it before Start; "" adds nothing.
// Probes are off unless you call it.
func (m *Manager) ServeHealth(addr string) error {
	if addr == "" {
		return nil
	}
	spec := serve.Spec{
		Name:    "health",
		Addr:    addr,
		Handler: m.health.Handler(),
		Read:    5 * time.Second,
		Write:   10 * time.Second,
	}
	return m.Add(m.runnable(spec))
}

// AddReadyCheck adds a check to /readyz: the replica is ready only while
// every ready check returns nil.
func (m *Manager) AddReadyCheck(
	name string,
	check func(r *http.Request) error,
) {
	m.health.Add(name, true, check)
}

// AddHealthCheck adds a check to /healthz: a failing one makes the kubelet
// restart the container, so check only what a restart would fix.
func (m *Manager) AddHealthCheck(
	name string,
	check func(r *http.Request) error,
) {
	m.health.Add(name, false, check)
}

// AddNotedReadyCheck is AddReadyCheck for a check whose passing line on
// /readyz?verbose shows note's text after "ok", e.g. "[+]webhook-certificate
// ok (serving a certificate for ... until ...)". note runs on the
// request's goroutine, as check does.
func (m *Manager) AddNotedReadyCheck(
	name string,
	check func(r *http.Request) error,
	note func() string,
) {
	m.health.AddNoted(name, true, check, note)
}

// WithLivenessBound makes /healthz (ServeHealth) fail while the controller
// is wedged: keys wait, every worker is busy, and no reconcile has finished
// for bound. The kubelet then restarts the container. The failing check,
// "controller-NAME", names the keys in flight and for how long:
//
//	c.WithReconcileTimeout(time.Minute).WithLivenessBound(5 * time.Minute)
//
// Pair it with a WithReconcileTimeout shorter than bound: a reconcile that
// honours its context then ends and frees its worker, so the check fails
// only for one that does not (a call without a deadline, a lock never
// released). A controller that is not running (a standby replica, caches
// syncing) is not wedged. Off by default (0).
func (c *Controller[T]) WithLivenessBound(bound time.Duration) *Controller[T] {
	if bound < 0 {
		c.host.misuse(fmt.Errorf("kctl: controller %q: WithLivenessBound(%v) must not be negative (0: no check)", c.name, bound))
		return c
	}
	// NewController's host is its Manager; the Manager's health checks
	// are floor 3's (AddHealthCheck), so controllerHost does not name them.
	m, isManager := c.host.(*Manager)
	if bound > 0 && isManager {
		m.AddHealthCheck("controller-"+c.name, func(*http.Request) error {
			return c.wedged(bound, time.Now())
		})
	}
	return c
}

// wedged is WithLivenessBound's check at now: an error if keys wait, every
// worker is busy and no reconcile has finished for bound. While keys wait,
// a worker whose reconcile finishes takes the next key at once: so none
// has finished since the latest of those in flight started.
func (c *controller[P]) wedged(bound time.Duration, now time.Time) error {
	c.mu.Lock()
	q := c.queue
	busy := len(c.active) >= c.workers
	var latest time.Time
	for _, started := range c.active {
		if started.After(latest) {
			latest = started
		}
	}
	idle := now.Sub(latest)
	c.mu.Unlock()
	if q == nil || !busy || idle < bound {
		return nil
	}
	waiting := q.Len()
	if waiting == 0 {
		return nil
	}
	return fmt.Errorf("controller %q is wedged: %d keys wait, all %d workers busy, no reconcile finished for %v (WithLivenessBound(%v)); %s",
		c.name, waiting, c.workers, idle.Round(time.Millisecond), bound, c.busy())
}

// ServeSecureMetrics serves the metrics page at /metrics over HTTPS (TLS
// 1.2 or later) on addr, e.g. ":8443", to scrapers allowed to read it:
//
//   - the request must carry a bearer token (Authorization: Bearer ...),
//     which the API server must accept (a TokenReview), else 401;
//   - its user must be allowed to get the non-resource URL /metrics
//     (a SubjectAccessReview), else 403.
//
// Neither a 401 nor a 403 renders the page. Each verdict is kept 10 s per
// token (a rejected token's, 5 s), so a scrape every 10 s or more costs
// two small requests, and a token revoked or a right removed takes effect
// within 10 s. No caller can slow the Manager's own requests with tokens:
// the reviews go through a connection of their own, with a rate limit of
// its own (20 requests a second, burst 40). At most 10 tokens a second
// (after a burst of 20) that have no verdict, or a rejected one, are
// reviewed; past that a request is answered 429 with Retry-After: 1. A
// token the API server has authenticated before is reviewed again when
// its verdict expires, past that bound, so that a flood of new tokens
// cannot keep a real scraper out. The cache keeps the 1024 tokens used
// last: at most 120 others can be reviewed within a verdict's 10 s, so a
// flood never evicts one early. The Manager's own identity needs to
// create tokenreviews and subjectaccessreviews (bind the ClusterRole
// system:auth-delegator). A Prometheus needs, bound to its
// ServiceAccount:
//
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: ClusterRole
//	metadata: {name: metrics-reader}
//	rules:
//	- nonResourceURLs: ["/metrics"]
//	  verbs: ["get"]
//
// and a scrape config with scheme https, its ServiceAccount token as
// authorization credentials_file, and the server's CA as tls_config
// ca_file (or insecure_skip_verify with a self-signed certificate).
//
// The certificate is certDir/tls.crt with its key certDir/tls.key,
// reloaded on change as webhook.Serve does; with certDir "" a self-signed
// one is made in memory at start. It is Add of a Runnable named
// "metrics", so call it before Start (and not with ServeMetrics); "" adds
// nothing.
func (m *Manager) ServeSecureMetrics(addr, certDir string) error {
	if addr == "" {
		return nil
	}
	tlsConfig, err := certwatch.ServerConfig(certDir, "kctl metrics (self-signed)", func(err error) {
		m.log.Error("kctl: secure metrics: " + err.Error())
	})
	if err != nil {
		return fmt.Errorf("kctl: secure metrics: %w", err)
	}
	Declare[metricsauth.TokenReview](Resource{
		Group:   "authentication.k8s.io",
		Version: "v1",
		Kind:    "TokenReview",
	})
	Declare[metricsauth.AccessReview](Resource{
		Group:   "authorization.k8s.io",
		Version: "v1",
		Kind:    "SubjectAccessReview",
	})
	conn, err := m.reviewConn()
	if err != nil {
		return err
	}
	tokens := NewClient[metricsauth.TokenReview](conn)
	access := NewClient[metricsauth.AccessReview](conn)
	auth := metricsauth.New(tokens, access, m.log)
	spec := m.metricsServer(addr)
	spec.Handler = auth.Wrap(spec.Handler)
	spec.TLS = serve.TLS(tlsConfig)
	return m.Add(m.runnable(spec))
}

// reviewConn is the connection of the reviews: the Manager's
// configuration with a transport and a rate limit of its own, so that no
// caller of the metrics page takes the place of the Manager's requests in
// its rate limiter or its connection. Its requests count on the Manager's
// metrics page as its own do. (A Transport set in Options.Config is
// shared; there is nothing else to use.)
func (m *Manager) reviewConn() (*Conn, error) {
	cfg := rest.CopyConfig(m.config)
	cfg.QPS = metricsauth.ReviewQPS
	cfg.Burst = metricsauth.ReviewQPSBurst
	if cfg.Proxy == nil {
		// client-go shares one transport between equal configurations,
		// but never one with a Proxy func: this makes it its own.
		cfg.Proxy = http.ProxyFromEnvironment
	}
	conn, err := NewConn(cfg)
	if err != nil {
		return nil, fmt.Errorf("kctl: secure metrics: %w", unprefixed(err))
	}
	conn.requests = m.metrics.Requests
	conn.logWarningsTo(m.log)
	return conn, nil
}

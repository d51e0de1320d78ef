package kctl

// An extra: the HTTP servers a Manager runs: HTTPServer runnables and
// ServeMetrics, and the timeouts every server of kctl's sets.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// HTTPServer returns a Runnable that serves h on addr (e.g. "127.0.0.1:8082")
// while the Manager runs, for endpoints that enqueue keys or report state.
// It logs to the Manager's logger (LoggerFrom of its context). The server
// allows 10 s for a request's headers, 30 s for the whole request, 1 min to
// write the answer, and closes a connection idle for 90 s; an endpoint that
// streams for longer needs a server of its own.
func HTTPServer(name, addr string, h http.Handler) Runnable {
	spec := serverSpec{
		name:    name,
		addr:    addr,
		handler: h,
		read:    30 * time.Second,
		write:   time.Minute,
	}
	run := func(ctx context.Context) error {
		return spec.serve(ctx, LoggerFrom(ctx))
	}
	return Runnable{Name: name, Run: run}
}

// serverSpec is one server kctl runs: where, what, and its timeouts for
// reading a request and writing an answer. Every server also has a 10 s
// ReadHeaderTimeout and a 90 s IdleTimeout.
type serverSpec struct {
	name, addr  string
	handler     http.Handler
	read, write time.Duration
	// tls, if set, wraps the listener to serve TLS (serveTLS). A func, not
	// a *tls.Config, so that programs serving plain HTTP only do not link
	// TLS's server side.
	tls func(net.Listener) net.Listener
	// connContext is http.Server's ConnContext; may be nil.
	connContext func(context.Context, net.Conn) context.Context
}

// serveTLS is serverSpec.tls for cfg, which is made to speak TLS 1.2 or
// later and HTTP/1.1 only, as controller-runtime serves by default:
// HTTP/2's stream resets let one client flood a server (CVE-2023-44487).
func serveTLS(cfg *tls.Config) func(net.Listener) net.Listener {
	cfg.MinVersion = tls.VersionTLS12
	cfg.NextProtos = []string{"http/1.1"}
	return func(ln net.Listener) net.Listener {
		return tls.NewListener(ln, cfg)
	}
}

// runnable is s as a Runnable on every replica, logging to m's logger.
func (m *Manager) runnable(s serverSpec) Runnable {
	run := func(ctx context.Context) error {
		return s.serve(ctx, m.log)
	}
	return Runnable{Name: s.name, Run: run}
}

// serve runs the server until ctx ends.
func (s serverSpec) serve(ctx context.Context, log *slog.Logger) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("kctl: %s server cannot listen on %s: %w",
			s.name, s.addr, err)
	}
	srv := s.httpServer(log)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving "+s.name, "addr", ln.Addr().String(),
		"tls", s.tls != nil,
		"readTimeout", s.read, "writeTimeout", s.write)
	if s.tls != nil {
		ln = s.tls(ln)
	}
	err = srv.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kctl: %s server on %s: %w", s.name, s.addr, err)
	}
	return nil
}

// httpServer is the http.Server of s, logging to log.
func (s serverSpec) httpServer(log *slog.Logger) *http.Server {
	// not the log package's default logger
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelError)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.read,
		WriteTimeout:      s.write,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          errorLog,
		ConnContext:       s.connContext,
	}
	return srv
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
func (m *Manager) metricsServer(addr string) serverSpec {
	page := m.metrics.Handler()
	only := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		page.ServeHTTP(w, r)
	}
	return serverSpec{
		name:    "metrics",
		addr:    addr,
		handler: http.HandlerFunc(only),
		read:    10 * time.Second,
		write:   30 * time.Second,
	}
}

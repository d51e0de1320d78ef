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
	"net/netip"
	"strings"
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
	// private marks a server of the program's internals (ServeDebug,
	// ServePprof): it answers only requests for its own host (ownHost),
	// and warns at start if it listens beyond loopback.
	private bool
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
	if s.private {
		s.warnBeyondLoopback(log, ln.Addr().String())
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
	handler := s.handler
	if s.private {
		handler = s.ownHostOnly(handler)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.read,
		WriteTimeout:      s.write,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          errorLog,
		ConnContext:       s.connContext,
	}
	return srv
}

// warnBeyondLoopback warns if bound, the address a private server
// listens on, is not a loopback one.
func (s serverSpec) warnBeyondLoopback(log *slog.Logger, bound string) {
	if onLoopback(bound) {
		return
	}
	log.Warn("kctl: the "+s.name+" server listens beyond loopback: "+
		"anyone who can reach "+bound+" can read it; "+
		"listen on 127.0.0.1 and reach it with kubectl port-forward",
		"addr", bound)
}

// onLoopback reports whether addr ("host:port") is a loopback address
// (127.0.0.0/8, ::1) or the name localhost. A wildcard (":6060",
// "0.0.0.0:6060") is not: it listens on every interface.
func onLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// ownHostOnly answers 421 Misdirected Request to a request that is not
// for s's own host (ownHost), and passes the others to h. It defeats DNS
// rebinding: a web page whose name its owner points at this address
// sends that name as the Host.
func (s serverSpec) ownHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local := ""
		a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if ok {
			local = a.String()
		}
		if !ownHost(s.addr, local, r.Host) {
			http.Error(w, fmt.Sprintf("kctl: the %s server does "+
				"not answer for Host %q: reach it by its IP "+
				"address or localhost", s.name, r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ownHost reports whether a request's Host header (host) names the server
// that listens on bound (as configured, e.g. ":6060") and took the request
// on local (the connection's local address): a loopback name (localhost,
// *.localhost) or address, the connection's local IP address, or bound's
// host. The port is not compared: kubectl port-forward and Services
// change it, and a rebound name comes with its own port anyway.
func ownHost(bound, local, host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		port = ""
	}
	if strings.Trim(port, "0123456789") != "" {
		return false
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" {
		return false
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	boundHost, _, _ := net.SplitHostPort(bound)
	if name == strings.ToLower(strings.TrimSuffix(boundHost, ".")) {
		return true
	}
	ip, err := netip.ParseAddr(name)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return true
	}
	localPort, err := netip.ParseAddrPort(local)
	return err == nil && localPort.Addr().Unmap() == ip
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

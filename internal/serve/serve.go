// Package serve runs the HTTP servers of kctl and of its serving packages
// (kctl/webhook, kctl/debug): every one with a timeout for reading a
// request and for writing its answer, TLS 1.2 or later and HTTP/1.1 only
// when it serves TLS, a private server's guard against DNS rebinding, and
// a graceful shutdown when asked for one. It needs no kctl type.
package serve

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

// Spec is one server: where, what, and its timeouts for reading a
// request and writing an answer. Every server also has a 10 s
// ReadHeaderTimeout and a 90 s IdleTimeout. Serve runs it.
type Spec struct {
	Name, Addr  string
	Handler     http.Handler
	Read, Write time.Duration
	// TLS, if set, wraps the listener to serve TLS (see TLS). A func, not
	// a *tls.Config, so that programs serving plain HTTP only do not link
	// TLS's server side.
	TLS func(net.Listener) net.Listener
	// ConnContext is http.Server's ConnContext; may be nil.
	ConnContext func(context.Context, net.Conn) context.Context
	// Private marks a server of the program's internals (kctl/debug): it
	// answers only requests for its own host (OwnHost), and warns at
	// start if it listens beyond loopback.
	Private bool
	// DrainBy, if set, makes the shutdown graceful: when Serve's context
	// ends, the server stops listening, closes idle connections and lets
	// the answers in flight finish until the time DrainBy returns then;
	// it closes the connections still busy at that time, logging Busy's
	// text (may be nil). Unset, the server closes every connection at
	// once.
	DrainBy func() time.Time
	Busy    func() string
	// Attrs are more attributes of the "serving" log line.
	Attrs []any
}

// TLS is Spec.TLS for cfg, which is made to speak TLS 1.2 or later and
// HTTP/1.1 only, as controller-runtime serves by default: HTTP/2's
// stream resets let one client flood a server (CVE-2023-44487).
func TLS(cfg *tls.Config) func(net.Listener) net.Listener {
	cfg.MinVersion = tls.VersionTLS12
	cfg.NextProtos = []string{"http/1.1"}
	return func(ln net.Listener) net.Listener {
		return tls.NewListener(ln, cfg)
	}
}

// Serve runs the server until ctx ends, logging to log, then shuts it
// down (see DrainBy) and returns once that is done. It fails if it
// cannot listen.
func (s Spec) Serve(ctx context.Context, log *slog.Logger) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("kctl: %s server cannot listen on %s: %w",
			s.Name, s.Addr, err)
	}
	if s.Private {
		s.WarnBeyondLoopback(log, ln.Addr().String())
	}
	srv := s.httpServer(log)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		s.shutdown(srv, log)
	}()
	attrs := []any{"addr", ln.Addr().String(), "tls", s.TLS != nil,
		"readTimeout", s.Read, "writeTimeout", s.Write}
	log.Info("serving "+s.Name, append(attrs, s.Attrs...)...)
	if s.TLS != nil {
		ln = s.TLS(ln)
	}
	err = srv.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kctl: %s server on %s: %w", s.Name, s.Addr, err)
	}
	<-stopped
	return nil
}

// shutdown closes srv: at once without DrainBy, else gracefully until
// DrainBy's time, then closing the connections still busy.
func (s Spec) shutdown(srv *http.Server, log *slog.Logger) {
	if s.DrainBy == nil {
		srv.Close()
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), s.DrainBy())
	defer cancel()
	err := srv.Shutdown(ctx)
	if err == nil {
		return
	}
	busy := ""
	if s.Busy != nil {
		busy = s.Busy()
	}
	log.Error("kctl: "+s.Name+" server: shutdown timeout passed: "+
		"closing the connections of answers still in flight",
		"busy", busy)
	srv.Close()
}

// httpServer is the http.Server of s, logging to log.
func (s Spec) httpServer(log *slog.Logger) *http.Server {
	// not the log package's default logger
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelError)
	handler := s.Handler
	if s.Private {
		handler = s.ownHostOnly(handler)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.Read,
		WriteTimeout:      s.Write,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          errorLog,
		ConnContext:       s.ConnContext,
	}
	return srv
}

// WarnBeyondLoopback warns if bound, the address a private server
// listens on, is not a loopback one.
func (s Spec) WarnBeyondLoopback(log *slog.Logger, bound string) {
	if onLoopback(bound) {
		return
	}
	log.Warn("kctl: the "+s.Name+" server listens beyond loopback: "+
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
// for s's own host (OwnHost), and passes the others to h. It defeats DNS
// rebinding: a web page whose name its owner points at this address
// sends that name as the Host.
func (s Spec) ownHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local := ""
		a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if ok {
			local = a.String()
		}
		if !OwnHost(s.Addr, local, r.Host) {
			http.Error(w, fmt.Sprintf("kctl: the %s server does "+
				"not answer for Host %q: reach it by its IP "+
				"address or localhost", s.Name, r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// OwnHost reports whether a request's Host header (host) names the server
// that listens on bound (as configured, e.g. ":6060") and took the request
// on local (the connection's local address): a loopback name (localhost,
// *.localhost) or address, the connection's local IP address, or bound's
// host. The port is not compared: kubectl port-forward and Services
// change it, and a rebound name comes with its own port anyway.
func OwnHost(bound, local, host string) bool {
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

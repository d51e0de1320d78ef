package kctl

// An extra: the HTTP servers a Manager runs: HTTPServer runnables and
// ServeMetrics.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// HTTPServer returns a Runnable that serves h on addr (e.g. "127.0.0.1:8082")
// while the Manager runs, for endpoints that enqueue keys or report state.
// It logs to the Manager's logger (LoggerFrom of its context).
func HTTPServer(name, addr string, h http.Handler) Runnable {
	run := func(ctx context.Context) error {
		return serve(ctx, name, addr, h, LoggerFrom(ctx))
	}
	return Runnable{Name: name, Run: run}
}

// server is HTTPServer logging to m's logger.
func (m *Manager) server(name, addr string, h http.Handler) Runnable {
	run := func(ctx context.Context) error {
		return serve(ctx, name, addr, h, m.log)
	}
	return Runnable{Name: name, Run: run}
}

// serve runs an HTTP server on addr until ctx ends.
func serve(
	ctx context.Context,
	name, addr string,
	h http.Handler,
	log *slog.Logger,
) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kctl: %s server cannot listen on %s: %w",
			name, addr, err)
	}
	// not the log package's default logger
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelError)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          errorLog,
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving "+name, "addr", ln.Addr().String())
	err = srv.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kctl: %s server on %s: %w", name, addr, err)
	}
	return nil
}

// ServeMetrics serves Prometheus metrics at /metrics on addr while the
// Manager runs, e.g. "127.0.0.1:8080" (":8080" listens on every interface:
// ask for it only in a Pod). It is Add of a Runnable named "metrics", so call
// it before Start; "" adds nothing, so that a flag can turn metrics off.
// Metrics are off unless you call it.
func (m *Manager) ServeMetrics(addr string) error {
	if addr == "" {
		return nil
	}
	metrics := http.StripPrefix("/metrics", m.metrics.Handler())
	return m.Add(m.server("metrics", addr, metrics))
}

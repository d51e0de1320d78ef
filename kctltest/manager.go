package kctltest

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
)

// Manager makes a kctl.Manager with opts, lets setup add controllers and
// runnables to it (setup may be nil), starts it, and returns it running. At
// the end of the test it is stopped, and t fails if Start returned an error
// (at any time) or did not return within opts.ShutdownTimeout plus 30 s.
//
// opts.Config defaults to the admin's (Config), and opts.Logger to a logger
// of this test alone, at debug level, whose lines show with the test's
// output (go test -v, or when it fails) and are dropped once it is over.
// Scope the cache to the test's namespace so that parallel tests do not
// reconcile each other's objects:
//
//	ns := env.Namespace(t)
//	env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, setup)
func (e *Env) Manager(t testing.TB, opts kctl.Options, setup func(*kctl.Manager)) *kctl.Manager {
	t.Helper()
	if opts.Config == nil {
		opts.Config = e.Config()
	}
	if opts.Logger == nil {
		opts.Logger = Logger(t)
	}
	mgr, err := kctl.NewManager(opts)
	if err != nil {
		t.Fatalf("kctltest: kctl.NewManager: %v", err)
	}
	if setup != nil {
		setup(mgr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("kctltest: Manager.Start returned: %v", err)
		}
	}()
	bound := opts.ShutdownTimeout
	if bound <= 0 {
		bound = 30 * time.Second // kctl's default
	}
	bound += 30 * time.Second
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(bound):
			t.Errorf("kctltest: Manager.Start did not return %v after its context ended", bound)
		}
	})
	return mgr
}

// Logger returns a logger at debug level whose lines go to t's output, as
// t.Log's do (shown with go test -v, or when the test fails), and are
// dropped once the test is over, so that a goroutine outliving it does not
// make the test binary panic.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{out: t.Output()}
	t.Cleanup(w.close) // registered first, so it runs after every later cleanup
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter writes to a test's output until close.
type testWriter struct {
	mu     sync.Mutex
	out    io.Writer
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	return w.out.Write(p)
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

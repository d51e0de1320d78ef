package kctltest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/controlplane"
)

// Manager makes a kctl.Manager with opts, lets setup add controllers and
// runnables to it (setup may be nil), starts it, and returns it running. At
// the end of the test it is stopped, and t fails if Start returned an error
// (at any time) or did not return within opts.ShutdownTimeout plus 30 s.
// It is StartManager's Manager, for a setup that returns no error.
//
// opts.Config defaults to the admin's (Config), and opts.Logger to a logger
// of this test alone, at debug level, whose lines show with the test's
// output (go test -v, or when it fails) and are dropped once it is over.
// Scope the cache to the test's namespace so that parallel tests do not
// reconcile each other's objects:
//
//	ns := env.Namespace(t)
//	env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, setup)
func (e *Env) Manager(t TB, opts kctl.Options, setup func(*kctl.Manager)) *kctl.Manager {
	t.Helper()
	withErr := func(m *kctl.Manager) error {
		if setup != nil {
			setup(m)
		}
		return nil
	}
	return e.StartManager(t, opts, withErr).Manager()
}

// StartManager is Manager for a setup that returns an error (a scaffolded
// SetupWithManager does), which fails t, and returns a handle that can stop
// the Manager and start a new one with the same opts and setup, to test
// what a controller does across a restart:
//
//	run := env.StartManager(t, opts, func(mgr *kctl.Manager) error { return SetupWithManager(mgr) })
//	run.Stop(t)
//	kctltest.Consistently(t, "nothing reconciled while stopped", ...)
//	run.Start(t)
//	kctltest.Eventually(t, "one reconcile after the restart", func() string { ... run.Reconciles(t, "widgets") ... })
//
// Each Manager serves its metrics on a free loopback port, for Reconciles.
// opts.KlogToLogger is ignored: klog is process-wide, and its lines go
// where Main says.
func (e *Env) StartManager(t TB, opts kctl.Options, setup func(*kctl.Manager) error) *RunningManager {
	t.Helper()
	if opts.Config == nil {
		opts.Config = e.Config()
	}
	if opts.Logger == nil {
		opts.Logger = Logger(t)
	}
	if opts.KlogToLogger {
		// klog is process-wide: the last Manager would take the lines of every test.
		opts.KlogToLogger = false
		opts.Logger.Info("kctltest: Options.KlogToLogger is ignored: klog's lines go where Main says")
	}
	r := &RunningManager{opts: opts, setup: setup, inMemory: e.mem != nil}
	t.Cleanup(func() { r.Stop(t) })
	r.Start(t)
	return r
}

// RunningManager is a kctl.Manager that StartManager started, which Stop
// stops and Start replaces with a new one made the same way. Its methods
// are for the test's goroutine (a Ginkgo spec's too).
type RunningManager struct {
	opts     kctl.Options
	setup    func(*kctl.Manager) error
	inMemory bool // in memory: no metrics page inside a synctest bubble (a socket would stall its clock)

	mu      sync.Mutex
	mgr     *kctl.Manager // the current one; nil before the first Start
	metrics string        // its metrics page's URL
	cancel  context.CancelFunc
	done    chan struct{} // closed when its Start returned; nil when stopped
	err     error         // what its Start returned, once done
}

// Manager returns the Manager running, or the last one stopped.
func (r *RunningManager) Manager() *kctl.Manager {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mgr
}

// Start makes a new Manager with the options and setup StartManager got,
// starts it, and returns once its metrics page answers (at most 30 s); it
// does nothing while one runs. Errors fail t.
func (r *RunningManager) Start(t TB) {
	t.Helper()
	r.mu.Lock()
	running := r.done != nil
	r.mu.Unlock()
	if running {
		return
	}
	mgr, err := kctl.NewManager(r.opts)
	if err != nil {
		t.Fatalf("kctltest: kctl.NewManager: %v", err)
	}
	if r.setup != nil {
		if err := r.setup(mgr); err != nil {
			t.Fatalf("kctltest: the Manager's setup: %v", err)
		}
	}
	addr := ""
	serve := !r.inMemory || !inSynctestBubble()
	if serve {
		held, err := controlplane.ReservePorts(1)
		if err == nil {
			t.Cleanup(held.Release) // held until the test ends: the server binds it in Start
			addr = held.Addr(0)
			err = mgr.ServeMetrics(addr)
		}
		if err != nil {
			t.Fatalf("kctltest: serving the Manager's metrics: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.mu.Lock()
	r.mgr = mgr
	r.metrics = ""
	if serve {
		r.metrics = "http://" + addr + "/metrics"
	}
	r.cancel = cancel
	r.done = done
	r.err = nil
	r.mu.Unlock()
	go func() {
		err := mgr.Start(ctx)
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(done)
	}()
	if !serve {
		return
	}
	if !waitServing(t, "http://"+addr+"/metrics", done) {
		r.mu.Lock()
		err := r.err
		r.done = nil
		r.mu.Unlock()
		t.Fatalf("kctltest: Manager.Start returned at once: %v", err)
	}
}

// waitServing waits up to 30 s until url answers, and tells whether it did
// before done was closed.
func waitServing(t TB, url string, done <-chan struct{}) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	every := time.Millisecond
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return true
		}
		if time.Now().After(deadline) {
			t.Fatalf("kctltest: the Manager's metrics page %s does not answer 30 s after its start: %v", url, err)
		}
		select {
		case <-done:
			return false
		case <-time.After(every):
		}
		every = min(2*every, 20*time.Millisecond)
	}
}

// Stop stops the Manager and waits for its Start to return, at most
// opts.ShutdownTimeout plus 30 s. t fails if Start returned an error or did
// not return in time. It does nothing when none runs.
func (r *RunningManager) Stop(t TB) {
	t.Helper()
	r.mu.Lock()
	cancel := r.cancel
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return
	}
	bound := r.opts.ShutdownTimeout
	if bound <= 0 {
		bound = 30 * time.Second // kctl's default
	}
	bound += 30 * time.Second
	cancel()
	select {
	case <-done:
	case <-time.After(bound):
		t.Errorf("kctltest: Manager.Start did not return %v after its context ended", bound)
		return
	}
	r.mu.Lock()
	err := r.err
	r.done = nil
	r.mu.Unlock()
	if err != nil {
		t.Errorf("kctltest: Manager.Start returned: %v", err)
	}
}

// Reconciles returns how many reconciles the controller named controller
// of the current Manager has finished since it started, by result: the
// controller_runtime_reconcile_total series of its metrics page, e.g.
// {"success": 2, "error": 1, "requeue_after": 0, "requeue": 0}. A
// controller not (yet) on the page gives an empty map; a failed read fails t.
func (r *RunningManager) Reconciles(t TB, controller string) map[string]int {
	t.Helper()
	r.mu.Lock()
	url := r.metrics
	r.mu.Unlock()
	if url == "" {
		t.Fatalf("kctltest: RunningManager.Reconciles reads the Manager's metrics page, which a Manager in a synctest bubble does not serve (a socket would stall the bubble's clock): count reconciles in the test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatalf("kctltest: reading the Manager's metrics: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("kctltest: reading the Manager's metrics: %v", err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("kctltest: reading the Manager's metrics: %v", err)
	}
	return reconcileCounts(string(page), controller)
}

// reconcileLine is one series of controller_runtime_reconcile_total.
var reconcileLine = regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{([^}]*)\} (\S+)$`)

// reconcileCounts reads controller's reconcile counts by result from a
// metrics page.
func reconcileCounts(page, controller string) map[string]int {
	counts := map[string]int{}
	for _, m := range reconcileLine.FindAllStringSubmatch(page, -1) {
		labels := map[string]string{}
		for _, l := range strings.Split(m[1], ",") {
			k, v, _ := strings.Cut(l, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if labels["controller"] != controller {
			continue
		}
		n, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			counts[labels["result"]] = int(n)
		}
	}
	return counts
}

// Context returns a context that ends with the test, whose kctl logger
// (kctl.LoggerFrom) is Logger(t): for a unit test that calls a reconcile
// function or a runnable directly, so that what it logs shows with the
// test's output:
//
//	res, err := reconcile(kctltest.Context(t), widget)
func Context(t TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return kctl.WithLogger(ctx, Logger(t))
}

// Logger returns a logger at debug level whose lines go to t's output, as
// t.Log's do (shown with go test -v, or when the test fails), and are
// dropped once the test is over, so that a goroutine outliving it does not
// make the test binary panic.
func Logger(t TB) *slog.Logger {
	w := &testWriter{out: outputOf(t)}
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

// outputOf is t's Output(), or, for a TB without one, a writer that passes
// each line to t.Logf.
func outputOf(t TB) io.Writer {
	if o, ok := t.(interface{ Output() io.Writer }); ok {
		return o.Output()
	}
	return logfWriter{t}
}

// logfWriter writes through t.Logf, one call per Write, without the
// trailing newline (Logf adds one).
type logfWriter struct{ t TB }

func (w logfWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimSuffix(p, []byte("\n")))
	return len(p), nil
}

// inSynctestBubble tells whether the calling goroutine is in a
// testing/synctest bubble: synctest.Wait panics outside one (and inside,
// waits until the bubble's other goroutines are blocked).
func inSynctestBubble() (in bool) {
	defer func() {
		if recover() != nil {
			in = false
		}
	}()
	synctest.Wait()
	return true
}

package kctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// testManager makes a Manager whose cache holds only namespace ns.
func testManager(t *testing.T, cfg *rest.Config, ns string, opts Options) *Manager {
	t.Helper()
	opts.Config = cfg
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m, err := NewManager(opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

// testWriter sends log lines to t.Log, so they show with the failing test only.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// startManager runs m.Start in the background. stop cancels it and returns
// what Start returned; it also runs at the end of the test.
func startManager(t *testing.T, m *Manager) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				err = errors.New("Manager.Start did not return 60s after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Manager.Start returned %v", err)
		}
	})
	return stop
}

func TestManager_GracefulShutdown_DrainsSlowReconcile(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: 20 * time.Second})
	cms := ClientFor[corev1.ConfigMap](mgr)
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	c := NewController(mgr, "slow", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		finished.Store(true)
		return Result{}, nil
	})
	stop := startManager(t, mgr)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}); err != nil {
		t.Fatal(err)
	}
	<-started
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, "the queue shutting down", q.ShuttingDown)
	select {
	case err := <-stopped:
		t.Fatalf("Start returned (%v) while a reconcile was still running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Start returned %v after a graceful shutdown", err)
	}
	if !finished.Load() {
		t.Error("the in-flight reconcile did not finish before Start returned")
	}
}

func mustConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestManager_BuilderMistakes_AreReturnedByStart(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	type unknown struct {
		metav1.TypeMeta
		metav1.ObjectMeta
	}
	NewController(mgr, "bad", func(ctx context.Context, u *unknown) (Result, error) { return Result{}, nil })
	NewController(mgr, "zero", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil }).MaxConcurrentReconciles(0)
	err := mgr.Start(t.Context())
	if err == nil {
		t.Fatal("Start succeeded with an undeclared type and 0 workers")
	}
	for _, want := range []string{`controller "bad"`, "kctl.Declare", "MaxConcurrentReconciles(0)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not mention %q", err, want)
		}
	}
}

func TestManager_OptIns_FailAfterStartAndElectLeaderChecksItsConfig(t *testing.T) {
	mgr, err := NewManager(Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, // never contacted
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(mgr.ServeMetrics(""), mgr.ServeHealth("")); err != nil || len(mgr.runnables) != 0 {
		t.Errorf(`ServeMetrics("") and ServeHealth("") = %v and added %d runnables, want nil and none`, err, len(mgr.runnables))
	}
	if err := mgr.ElectLeader(LeaderElection{Name: "x", Namespace: "ns", RetryPeriod: time.Hour}); err == nil || !strings.Contains(err.Error(), "RetryPeriod") {
		t.Errorf("ElectLeader with RetryPeriod > RenewDeadline = %v, want an error naming RetryPeriod", err)
	}
	if err := mgr.ElectLeader(LeaderElection{Name: "x", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.ElectLeader(LeaderElection{Name: "y", Namespace: "ns"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a second ElectLeader = %v, want an error saying it was called twice", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("Start with an ended context = %v, want nil", err)
	}
	for call, err := range map[string]error{
		"ServeMetrics": mgr.ServeMetrics("127.0.0.1:0"),
		"ServeHealth":  mgr.ServeHealth("127.0.0.1:0"),
		"ElectLeader":  mgr.ElectLeader(LeaderElection{Name: "x", Namespace: "ns"}),
	} {
		if err == nil || !strings.Contains(err.Error(), "after Start") {
			t.Errorf("%s after Start = %v, want an error saying so", call, err)
		}
	}
}

// TestManager_OptIns_AreLinkedOnlyWhenCalled builds two small programs and
// looks for the code of metrics, probes, leader election and Events in them:
// absent from one that calls none of them, present in one that calls all. A
// runtime `if` in the Manager instead of a call would link them into every
// program (about 0.6 MB of a stripped binary).
func TestManager_OptIns_AreLinkedOnlyWhenCalled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	optIns := []string{ // part of the name of a function of each (inlined ones are named after their caller too)
		"metrics.(*Registry).Page",
		"(*healthChecks).handler",
		"election.(*Elector).Run",
		"(*EventRecorder).deliver",
		"net/http.(*Server).Serve",
	}
	const program = `package main

import (
	"context"

	"github.com/kctl-dev/kctl"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	mgr, _ := kctl.NewManager(kctl.Options{})
	kctl.NewController(mgr, "c", func(context.Context, *corev1.ConfigMap) (kctl.Result, error) { return kctl.Result{}, nil })
	%s
	mgr.Start(context.Background())
}
`
	for _, tc := range []struct {
		name, calls string
		linked      bool
	}{
		{"none", "", false},
		{"all", `mgr.ServeMetrics(":1"); mgr.ServeHealth(":2"); mgr.ElectLeader(kctl.LeaderElection{Name: "l"})
	mgr.EventRecorder("c")`, true},
	} {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"go.work":      "go 1.26.0\n\nuse (\n\t" + strconv.Quote(root) + "\n\t./prog\n)\n",
			"prog/go.mod":  "module prog\n\ngo 1.26.0\n",
			"prog/main.go": fmt.Sprintf(program, tc.calls),
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "prog.bin"), ".")
		build.Dir, build.Env = filepath.Join(dir, "prog"), append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the program calling %s: %v\n%s", tc.name, err, out)
		}
		nm, err := exec.Command("go", "tool", "nm", filepath.Join(dir, "prog.bin")).Output()
		if err != nil {
			t.Fatalf("go tool nm: %v", err)
		}
		for _, sym := range optIns {
			if linked := strings.Contains(string(nm), sym); linked != tc.linked {
				t.Errorf("a program calling %s of the opt-ins: %s linked = %v, want %v", tc.name, sym, linked, tc.linked)
			}
		}
	}
}

// eventually polls cond until it holds, failing the test after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer collects log output from many goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// linesEventually waits until at least n logged lines contain substr (the
// cache logs after it has released its lock, so a line may trail the event
// or the sync it is about) and returns them.
func (b *logBuffer) linesEventually(t *testing.T, substr string, n int) []string {
	t.Helper()
	eventually(t, fmt.Sprintf("%d log lines containing %q", n, substr), func() bool { return len(b.lines(substr)) >= n })
	return b.lines(substr)
}

// lines returns the logged lines that contain substr.
func (b *logBuffer) lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// Issue 25, item 4: a controller name is taken once per Manager.
func TestManager_TwoControllersWithOneName_StartNamesBoth(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	NewController(mgr, "same", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	NewController(mgr, "same", func(ctx context.Context, s *corev1.Secret) (Result, error) { return Result{}, nil })
	err := mgr.Start(t.Context())
	if err == nil {
		t.Fatal("Start succeeded with two controllers named \"same\"")
	}
	for _, want := range []string{`two controllers are named "same"`, "one of ConfigMap, made at kctl_test.go:", "one of Secret, made at kctl_test.go:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not mention %q", err, want)
		}
	}
}

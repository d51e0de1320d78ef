package kctl

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShutdown_Schedule_KeepsAFifthAtMostTwoSecondsForTheLastSteps(t *testing.T) {
	for _, tc := range []struct {
		timeout                               time.Duration
		drainBy, abandonAt, writesBy, endTime time.Duration // after t0
	}{
		{3 * time.Second, 2400 * time.Millisecond, 2700 * time.Millisecond, 2850 * time.Millisecond, 3 * time.Second},
		{30 * time.Second, 28 * time.Second, 29 * time.Second, 29500 * time.Millisecond, 30 * time.Second},
	} {
		s := &shutdownSchedule{timeout: tc.timeout}
		t0 := s.begin()
		got := []time.Duration{s.drainBy().Sub(t0), s.abandonAt().Sub(t0), s.writesBy().Sub(t0), s.end().Sub(t0)}
		want := []time.Duration{tc.drainBy, tc.abandonAt, tc.writesBy, tc.endTime}
		if !slices.Equal(got, want) {
			t.Errorf("ShutdownTimeout %v: drainBy, abandonAt, writesBy, end = %v after t0, want %v", tc.timeout, got, want)
		}
	}
}

// TestManager_Shutdown_ReturnsWithinTimeoutAbandoningWorkThatIgnoresItsContext
// is issue 15 item 8: with a 3 s ShutdownTimeout and a reconcile that ignored
// its context for 20 s, Start returned after 18.9 s, and a standby took over
// only then.
func TestManager_Shutdown_ReturnsWithinTimeoutAbandoningWorkThatIgnoresItsContext(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	const timeout = 3 * time.Second
	var logs logBuffer // not t.Log: the abandoned work logs after the test has ended
	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: timeout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() {
		if t.Failed() {
			t.Logf("the Manager's log:\n%s", logs.String())
		}
	}()
	if err := mgr.ElectLeader(apiLeaderElection(ns, "stubborn-0")); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{}) // closed when the test ends: the abandoned work then returns
	defer close(release)
	reconciling := make(chan struct{}, 1)
	NewController(mgr, "stubborn", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		reconciling <- struct{}{}
		<-release // ignores ctx
		return Result{}, nil
	})
	if err := mgr.Add(Runnable{Name: "deaf", Run: func(context.Context) error { <-release; return nil }}); err != nil {
		t.Fatal(err)
	}
	rec := mgr.EventRecorder("stubborn")
	stop := startManager(t, mgr)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck"}}
	if err := ClientFor[corev1.ConfigMap](mgr).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconciling:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile of the ConfigMap within 30s")
	}
	rec.Event(cm, corev1.EventTypeNormal, "Stuck", "recorded before shutdown")

	begin := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Start returned %v, want nil", err)
	}
	if took := time.Since(begin); took > timeout+500*time.Millisecond { // 500ms: scheduling slack of a loaded machine
		t.Errorf("Start returned %v after its context ended, want within ShutdownTimeout (%v)", took.Round(time.Millisecond), timeout)
	}
	code, body := testRawRequest(t, cfg, "GET", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/leader-test", "")
	var lease coordinationv1.Lease
	if err := json.Unmarshal(body, &lease); code != 200 || err != nil {
		t.Fatalf("GET lease: %d %s", code, body)
	}
	if h := holderOf(&lease); h != "" {
		t.Errorf("the lease is held by %q after Start returned, want released", h)
	}
	for _, want := range []string{"abandoning leader work", `controller stubborn (reconciling ` + ns + `/stuck`, "Start returns while these still run", "deaf"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not name %q", want)
		}
	}
	waitForEvent(t, mustConn(t, cfg), cm, 1) // an Event recorded before shutdown is written
}

// TestManager_Shutdown_CancelsInFlightReconcilesAtDrainBy backs the promise
// of Manager.Start: an in-flight reconcile may finish until ShutdownTimeout
// less a reserve (3 s less 600 ms), and its context is then cancelled, so
// that work which honours it ends in time and nothing is abandoned.
func TestManager_Shutdown_CancelsInFlightReconcilesAtDrainBy(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	const timeout = 3 * time.Second
	const drainBy = 2400 * time.Millisecond // timeout - min(timeout/5, 2s)
	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: timeout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() {
		if t.Failed() {
			t.Logf("the Manager's log:\n%s", logs.String())
		}
	}()
	reconciling := make(chan struct{}, 1)
	cancelled := make(chan time.Time, 1)
	NewController(mgr, "draining", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		select { // one reconcile is expected; a second must not block
		case reconciling <- struct{}{}:
		default:
		}
		<-ctx.Done() // work that stops when its context ends
		select {
		case cancelled <- time.Now():
		default:
		}
		return Result{}, nil
	})
	stop := startManager(t, mgr)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}
	if err := ClientFor[corev1.ConfigMap](mgr).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconciling:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile of the ConfigMap within 30s")
	}

	begin := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Start returned %v, want nil", err)
	}
	took := time.Since(begin)
	var at time.Duration
	select {
	case end := <-cancelled:
		at = end.Sub(begin)
	default:
		t.Fatal("Start returned, but the in-flight reconcile's context never ended")
	}
	t.Logf("the reconcile's context ended %v, and Start returned %v, after the Manager's context", at.Round(time.Millisecond), took.Round(time.Millisecond))
	// Not before drainBy less 100ms (t0 is a little after the cancel, never
	// before it); at most 500ms late, for a loaded machine.
	if at < drainBy-100*time.Millisecond || at > drainBy+500*time.Millisecond {
		t.Errorf("the reconcile's context ended %v after the Manager's, want at about %v (ShutdownTimeout %v less a fifth)",
			at.Round(time.Millisecond), drainBy, timeout)
	}
	if took >= timeout {
		t.Errorf("Start returned %v after its context ended, want before ShutdownTimeout (%v): the reconcile returned at %v",
			took.Round(time.Millisecond), timeout, at.Round(time.Millisecond))
	}
	if !strings.Contains(logs.String(), "shutdown timeout nearly passed: cancelling in-flight reconciles") {
		t.Error("the log does not say that in-flight reconciles are cancelled")
	}
	if strings.Contains(logs.String(), "abandoning") {
		t.Error("the log abandons work, want none: the reconcile honoured its context")
	}
}

// hangingEvents is an eventSink whose writes hang until their context ends.
type hangingEvents struct{}

func (hangingEvents) create(ctx context.Context, _ *corev1.Event) error {
	<-ctx.Done()
	return ctx.Err()
}
func (hangingEvents) patch(ctx context.Context, _, _ string, _ []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestEventRecorder_Shutdown_EveryEventNotWrittenIsCountedAndLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, log := testRecorder()
		r.sink = hangingEvents{}
		for i := range 3 {
			r.Event(eventPod(fmt.Sprint("web-", i), fmt.Sprint("uid-", i)), corev1.EventTypeNormal, "Created", "x")
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // shutting down: write what is buffered until flushBy
		start := time.Now()
		r.deliver(ctx, flushIn(time.Second))
		if took := time.Since(start); took != time.Second {
			t.Errorf("deliver returned %v after its ctx ended, want at flushBy (1s)", took)
		}
		r.Event(eventPod("late", "uid-late"), corev1.EventTypeNormal, "Created", "after the writer stopped")
		r.Event(eventPod("later", "uid-later"), corev1.EventTypeNormal, "Created", "after the writer stopped")
		if got := r.dropped.Load(); got != 5 {
			t.Errorf("dropped = %d, want 5 (a write cut off by the deadline, 2 left buffered, 2 after the writer stopped)", got)
		}
		for _, want := range []string{"could not write Event (dropped)", "Events not written in time (dropped)", "recorded after the Manager stopped writing Events"} {
			if n := strings.Count(log.String(), want); n != 1 {
				t.Errorf("the log says %q %d times, want once:\n%s", want, n, log)
			}
		}
	})
}

func TestManager_EventsDropped_OnTheMetricsPage(t *testing.T) {
	mgr, err := NewManager(Options{Config: testUnreachableConfig(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := mgr.EventRecorder("c") // never started: the buffer fills
	for i := range eventBuffer + 2 {
		rec.Event(eventPod(fmt.Sprint("web-", i), fmt.Sprint("uid-", i)), corev1.EventTypeNormal, "Created", "x")
	}
	if page := scrapeMetrics(t, mgr.metrics.Handler()); !strings.Contains(page, "\nkctl_events_dropped_total 2\n") {
		t.Errorf("the metrics page does not count 2 dropped Events:\n%s", page)
	}
}

// signalHelperEnv makes this test binary, run again by a test, a helper
// process: TestMain calls signalHelper instead of running the tests.
const signalHelperEnv = "KCTL_SIGNAL_HELPER"

// signalHelper calls SignalContext, prints "ready", prints "stopping" when
// the context ends, then hangs, as a shutdown that never ends: only the
// second signal can end the process.
func signalHelper() {
	ctx := SignalContext()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping")
	select {}
}

// The first SIGINT ends SignalContext's context; a second one exits the
// process at once with status 1, even though its shutdown hangs.
func TestSignalContext_SecondSignal_ExitsWithStatus1(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalHelperEnv+"=1")
	var out logBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // an error if it has exited already
		<-exited
	})
	eventually(t, `the helper to print "ready"`, func() bool { return strings.Contains(out.String(), "ready\n") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	eventually(t, `the helper to print "stopping"`, func() bool { return strings.Contains(out.String(), "stopping\n") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the process still runs 10s after a second SIGINT; output:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("after a second SIGINT the process ended with %v (exit code %d), want exit status 1; output:\n%s", waitErr, code, out.String())
	}
}

package kctl

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Tests of the Manager's life: what starts when, and where it logs.

// TestManager_AddedAfterStart_RunsLikeAddedBefore is issue 15 item 9: Add
// after Start returned an error, and a controller made after Start never ran.
func TestManager_AddedAfterStart_RunsLikeAddedBefore(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	if err := mgr.ElectLeader(apiLeaderElection(ns, "late-0")); err != nil {
		t.Fatal(err)
	}
	leading := make(chan struct{})
	if err := mgr.Add(Runnable{Name: "leading", NeedLeader: true, Run: func(ctx context.Context) error {
		close(leading)
		<-ctx.Done()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("not leading within 30s")
	}

	ran := make(chan string, 2)
	for _, needLeader := range []bool{false, true} {
		name := fmt.Sprintf("added after Start, NeedLeader %v", needLeader)
		if err := mgr.Add(Runnable{Name: name, NeedLeader: needLeader, Run: func(ctx context.Context) error {
			ran <- name
			<-ctx.Done()
			return nil
		}}); err != nil {
			t.Fatalf("Add(%q) = %v, want nil", name, err)
		}
	}
	reconciled := make(chan Key, 100)
	NewController(mgr, "late", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		reconciled <- Key{cm.Namespace, cm.Name}
		return Result{}, nil
	})
	if err := ClientFor[corev1.ConfigMap](mgr).Uncached().Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for got := map[string]bool{}; len(got) < 3; {
		select {
		case name := <-ran:
			got[name] = true
		case k := <-reconciled:
			got["controller late"] = got["controller late"] || k == Key{ns, "late"}
		case <-deadline:
			t.Fatalf("after 30s only %v ran, want both runnables and the controller made after Start", got)
		}
	}
}

// TestManager_Standby_KeepsEnqueuedKeysAndAddedRunnablesForItsTerm backs
// Enqueue's "kept until it runs" and Add's "in the next term, on a standby":
// a key enqueued and a leader-only runnable added on a standby after Start
// do not run while the other replica leads, and both run once it leads.
func TestManager_Standby_KeepsEnqueuedKeysAndAddedRunnablesForItsTerm(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}); err != nil {
		t.Fatal(err)
	}
	leader := testManager(t, cfg, ns, Options{})
	if err := leader.ElectLeader(apiLeaderElection(ns, "standby-0")); err != nil {
		t.Fatal(err)
	}
	leading := make(chan struct{})
	if err := leader.Add(Runnable{Name: "leading", NeedLeader: true, Run: func(ctx context.Context) error {
		close(leading)
		<-ctx.Done()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	stopLeader := startManager(t, leader)
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("not leading within 30s")
	}

	standby := testManager(t, cfg, ns, Options{})
	leases := &faultyLeases{leaseStore: NewClient[coordinationv1.Lease](standby.conn)}
	var attempts atomic.Int32 // the standby's tries for the lease: one read each
	leases.setFault(func(_ context.Context, verb string) error {
		if verb == "get" {
			attempts.Add(1)
		}
		return nil
	})
	if err := standby.electLeader(apiLeaderElection(ns, "standby-1"), leases, "ElectLeader"); err != nil {
		t.Fatal(err)
	}
	var log reconcileLog
	c := NewController(standby, "standby", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	startManager(t, standby)
	pollWithin(t, 10*time.Second, "the standby tries for the lease", func() bool { return attempts.Load() > 0 })
	c.Enqueue(Key{ns, "kept"})
	ran := make(chan struct{})
	if err := standby.Add(Runnable{Name: "added on the standby", NeedLeader: true, Run: func(ctx context.Context) error {
		close(ran)
		<-ctx.Done()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	tried := attempts.Load()
	pollWithin(t, 10*time.Second, "3 more tries by the standby", func() bool { return attempts.Load() >= tried+3 })
	select {
	case <-ran:
		t.Error("the runnable added on the standby ran while the other replica led")
	default:
	}
	if got := log.causes(ns + "/kept"); len(got) > 0 {
		t.Errorf("the standby reconciled kept (%v) while the other replica led", got)
	}

	if err := stopLeader(); err != nil {
		t.Fatalf("the leader's Start = %v, want nil", err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the runnable added on the standby did not run within 10s of the leader's release")
	}
	eventually(t, "kept reconciled for its Enqueue", func() bool { return log.saw(ns+"/kept", "manual") })
}

// lateWidget is a CRD that TestManager_ControllerOfMissingCRD installs only
// after the Manager has started.
type lateWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

var _ = Declare[lateWidget](Resource{Group: "late.manager.kctl.dev", Version: "v1", Kind: "LateWidget", Namespaced: true})

const lateWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"latewidgets.late.manager.kctl.dev"},
 "spec":{"group":"late.manager.kctl.dev","scope":"Namespaced",
  "names":{"plural":"latewidgets","singular":"latewidget","kind":"LateWidget","listKind":"LateWidgetList"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// TestManager_ControllerOfMissingCRD_HoldsBackNoOther is issue 15 item 10:
// Start waited for every controller's cache before starting any, so one
// missing CRD stopped every controller.
func TestManager_ControllerOfMissingCRD_HoldsBackNoOther(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	defer testCRDAbsent(t, cfg, ns, "late.manager.kctl.dev", "v1", "latewidgets")() // not t.Cleanup: t.Context() has ended by then

	healthAddr := freeLoopbackAddr(t)
	mgr := testManager(t, cfg, ns, Options{})
	if err := mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	reconciled := make(chan string, 100)
	NewController(mgr, "configmaps", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		reconciled <- "ConfigMap " + cm.Name
		return Result{}, nil
	})
	NewController(mgr, "widgets", func(ctx context.Context, w *lateWidget) (Result, error) {
		reconciled <- "LateWidget " + w.Name
		return Result{}, nil
	})
	startManager(t, mgr)
	waitFor := func(want string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case got := <-reconciled:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("no reconcile of %s within 30s", want)
			}
		}
	}

	if err := ClientFor[corev1.ConfigMap](mgr).Uncached().Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}); err != nil {
		t.Fatal(err)
	}
	waitFor("ConfigMap cm")
	pollPage(t, healthAddr, "/readyz?verbose", `503 naming controller "widgets" and its missing CRD`, func(code int, body string) bool {
		return code == 503 && strings.Contains(body, `controller "widgets" waits for its cache of latewidgets.late.manager.kctl.dev/v1`) &&
			strings.Contains(body, "not installed") && !strings.Contains(body, `controller "configmaps"`)
	})

	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", lateWidgetCRD); code != 201 {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	widget := `{"apiVersion":"late.manager.kctl.dev/v1","kind":"LateWidget","metadata":{"name":"w"}}`
	pollWithin(t, 30*time.Second, "a LateWidget created", func() bool {
		code, _ := testRawRequest(t, cfg, "POST", "/apis/late.manager.kctl.dev/v1/namespaces/"+ns+"/latewidgets", widget)
		return code == 201
	})
	waitFor("LateWidget w")
	pollPage(t, healthAddr, "/readyz", "200 once the CRD is installed", func(code int, body string) bool { return code == 200 })
}

// strayLogs is a slog.Handler that keeps every record it gets: none should.
type strayLogs struct {
	mu      sync.Mutex
	records []string
}

func (s *strayLogs) Enabled(context.Context, slog.Level) bool { return true }
func (s *strayLogs) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *strayLogs) WithGroup(string) slog.Handler            { return s }
func (s *strayLogs) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r.Level.String()+" "+r.Message)
	return nil
}

// neverInstalled is a CRD type that no test installs.
type neverInstalled struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

var _ = Declare[neverInstalled](Resource{Group: "never.manager.kctl.dev", Version: "v1", Kind: "NeverInstalled", Namespaced: true})

// TestManager_Logs_GoToOptionsLoggerOnly is issue 15 item 15: the cache and
// HTTPServer logged to slog.Default, net/http's errors to the log package,
// and NewManager redirected klog for the whole process.
func TestManager_Logs_GoToOptionsLoggerOnly(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	strays := &strayLogs{}
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(strays)) // the log package's output goes to it too

	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))})
	if err := mgr.ElectLeader(apiLeaderElection(ns, "logs-0")); err != nil {
		t.Fatal(err)
	}
	metricsAddr, healthAddr, hooksAddr := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	if err := mgr.ServeMetrics(metricsAddr); err != nil {
		t.Fatal(err)
	}
	if err := mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(HTTPServer("hooks", hooksAddr, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("a broken hook") // net/http recovers and logs it
	}))); err != nil {
		t.Fatal(err)
	}
	rec := mgr.EventRecorder("logs")
	reconciled := make(chan struct{}, 10)
	NewController(mgr, "logs", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		LoggerFrom(ctx).Info("a line from the reconcile")
		rec.Event(cm, "Unsupported", "Bad", "an Event of a type the recorder logs and drops")
		reconciled <- struct{}{}
		return Result{}, nil
	})
	NewController(mgr, "never", func(ctx context.Context, _ *neverInstalled) (Result, error) { return Result{}, nil }) // its cache logs
	stop := startManager(t, mgr)
	if err := ClientFor[corev1.ConfigMap](mgr).Uncached().Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconciled:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile within 30s")
	}
	pollWithin(t, 30*time.Second, "the hooks server", func() bool { return strings.Contains(logs.String(), "serving hooks") })
	if code, _ := getPage(t, hooksAddr, "/"); code != 0 {
		t.Errorf("GET on the panicking hook = %d, want the connection cut", code)
	}
	pollPage(t, metricsAddr, "/metrics", "metrics", func(code int, _ string) bool { return code == 200 })
	klog.Info("kctl test: a klog line, not asked to be redirected")
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{
		"leader election: became leader", "serving metrics", "serving health", "serving hooks", "http: panic serving",
		"a line from the reconcile", "unsupported type", "cache list failed", "neverinstalleds.never.manager.kctl.dev",
		"controller started", "shutting down", "released the lease",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the Manager's logger got no line with %q", want)
		}
	}
	if strings.Contains(logs.String(), "a klog line") {
		t.Error("klog's output went to the Manager's logger without KlogToLogger")
	}
	strays.mu.Lock()
	defer strays.mu.Unlock()
	if len(strays.records) > 0 {
		t.Errorf("%d lines went to slog.Default or the log package:\n%s", len(strays.records), strings.Join(strays.records, "\n"))
	}
}

func TestManager_KlogToLogger_RedirectsKlogOnlyWhenAsked(t *testing.T) {
	defer klog.ClearLogger()
	var logs logBuffer
	if _, err := NewManager(Options{Config: testUnreachableConfig(), KlogToLogger: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	klog.Info("kctl test: a klog line")
	klog.Flush()
	if !strings.Contains(logs.String(), "a klog line") {
		t.Errorf("with KlogToLogger, klog's line did not reach the Manager's logger; got:\n%s", logs.String())
	}
}

// testUnreachableConfig is the config of a Manager that never contacts a server.
func testUnreachableConfig() *rest.Config { return &rest.Config{Host: "https://127.0.0.1:1"} }

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

// Issue 25, item 9: mgr.Config() is the Manager's rest.Config, as a copy.
func TestManager_Config_IsACopyThatWorks(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	got := mgr.Config()
	if got.Host != cfg.Host {
		t.Errorf("Config().Host = %q, want %q", got.Host, cfg.Host)
	}
	got.Host = "https://127.0.0.1:1"
	if mgr.Config().Host != cfg.Host {
		t.Errorf("changing Config()'s result changed the Manager's")
	}
	conn, err := NewConn(mgr.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient[corev1.Namespace](conn).Get(t.Context(), "", "default"); err != nil {
		t.Errorf("a client made from Config() cannot read: %v", err)
	}
}

package kctltest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runFatal runs f with a fatalTB and returns its Fatalf message ("" if none).
func runFatal(t *testing.T, f func(tb kctltest.TB)) string {
	tb := &fatalTB{TB: t, ctx: t.Context()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	return tb.msg
}

func TestConsistently_StateHolds_ReturnsAfterItsTime(t *testing.T) {
	start := time.Now()
	calls := 0
	msg := runFatal(t, func(tb kctltest.TB) {
		kctltest.Consistently(tb, "nothing", func() string { calls++; return "" }, kctltest.Timeout(300*time.Millisecond))
	})
	if msg != "" || time.Since(start) < 300*time.Millisecond || calls < 2 {
		t.Errorf("Consistently of a state that holds: failure %q after %v and %d checks; want none, after 300ms, checked more than once",
			msg, time.Since(start), calls)
	}
}

func TestConsistently_StateBreaks_FailsAtOnceSayingWhatItSaw(t *testing.T) {
	start := time.Now()
	calls := 0
	msg := runFatal(t, func(tb kctltest.TB) {
		kctltest.Consistently(tb, "no Job", func() string {
			calls++
			if calls == 3 {
				return "1 Job: hello"
			}
			return ""
		}) // 3 s by default
	})
	if !strings.Contains(msg, "no Job") || !strings.Contains(msg, "1 Job: hello") || time.Since(start) > 2*time.Second {
		t.Errorf("Consistently of a state that breaks: failure %q after %v; want one naming what and what it saw, at once",
			msg, time.Since(start))
	}
}

func TestEventually_Timeout_BoundsThisCall(t *testing.T) {
	start := time.Now()
	msg := runFatal(t, func(tb kctltest.TB) {
		kctltest.Eventually(tb, "never", func() string { return "not yet" }, kctltest.Timeout(200*time.Millisecond))
	})
	took := time.Since(start)
	if !strings.Contains(msg, "waited 200ms for never") || !strings.Contains(msg, "not yet") || took > 5*time.Second {
		t.Errorf("Eventually with Timeout(200ms): failure %q after %v; want it to say it waited 200ms and what it saw", msg, took)
	}
}

// outputTB is a TB whose Output is a buffer of its own.
type outputTB struct {
	testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *outputTB) Output() io.Writer { return o }
func (o *outputTB) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}
func (o *outputTB) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// A reconcile function called in a unit test logs through kctl.LoggerFrom
// to the test's output.
func TestContext_LoggerFromWritesToTheTest(t *testing.T) {
	tb := &outputTB{TB: t}
	ctx := kctltest.Context(tb)
	kctl.LoggerFrom(ctx).Info("reconciled", "widget", "hello")
	if out := tb.String(); !strings.Contains(out, "msg=reconciled widget=hello") {
		t.Errorf("the test's output = %q, want the line logged through LoggerFrom(kctltest.Context(t))", out)
	}
}

func TestStartManager_SetupError_FailsTheTestWithIt(t *testing.T) {
	env := kctltest.Start(t)
	msg := runFatal(t, func(tb kctltest.TB) {
		env.StartManager(tb, kctl.Options{}, func(*kctl.Manager) error { return errors.New("no CRD for widgets") })
	})
	if !strings.Contains(msg, "no CRD for widgets") || !strings.Contains(msg, "setup") {
		t.Errorf("StartManager with a failing setup: failure %q, want it to carry setup's error", msg)
	}
}

// A Manager stopped reconciles nothing; started again, it catches up, and
// Reconciles counts each Manager's reconciles by result.
func TestStartManager_StopThenStart_ReconcilesAgainAndCounts(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	opts := kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
	run := env.StartManager(t, opts, func(mgr *kctl.Manager) error {
		gadgets := kctl.ClientFor[gadget](mgr)
		kctl.NewController(mgr, "gadgets", func(ctx context.Context, g *gadget) (kctl.Result, error) {
			if g.Spec.Size < 0 {
				return kctl.Result{}, kctl.Terminal(errors.New("negative size"))
			}
			g.Status.Seen = g.Generation
			return kctl.Result{}, gadgets.UpdateStatus(ctx, g)
		})
		return nil
	})
	gadgets := kctl.NewClient[gadget](env.Conn)
	create := func(name string, size int) {
		g := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		g.Spec.Size = size
		if err := gadgets.Create(t.Context(), g); err != nil {
			t.Fatal(err)
		}
	}
	create("a", 1)
	create("bad", -1)
	kctltest.WaitFor(t, gadgets, ns, "a", func(g *gadget) bool { return g != nil && g.Status.Seen == 1 })
	kctltest.Eventually(t, "a success and an error counted", func() string {
		n := run.Reconciles(t, "gadgets")
		if n["success"] < 1 || n["error"] < 1 {
			return fmt.Sprint(n)
		}
		return ""
	})

	run.Stop(t)
	create("b", 1)
	kctltest.Consistently(t, "b not reconciled while the Manager is stopped", func() string {
		g, err := gadgets.Get(t.Context(), ns, "b")
		if err != nil || g.Status.Seen != 0 {
			return fmt.Sprintf("%+v, %v", g.Status, err)
		}
		return ""
	}, kctltest.Timeout(time.Second))

	run.Start(t)
	kctltest.WaitFor(t, gadgets, ns, "b", func(g *gadget) bool { return g != nil && g.Status.Seen == 1 })
	kctltest.Eventually(t, "the new Manager's reconciles counted", func() string {
		if n := run.Reconciles(t, "gadgets"); n["success"] < 1 {
			return fmt.Sprint(n)
		}
		return ""
	})
}

// Restarting kube-apiserver keeps its address and its data. Not parallel:
// every test of the binary sees the restart.
func TestRestartAPIServer_SameAddressSameObjects(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}, Data: map[string]string{"a": "1"}}
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	host := env.Config().Host
	env.RestartAPIServer(t)
	if env.Config().Host != host {
		t.Errorf("after the restart the host is %s, want %s", env.Config().Host, host)
	}
	kctltest.WaitFor(t, cms, ns, "kept", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["a"] == "1" })
}

// An unknown field's failure says strict field validation refused it, and
// names the field, instead of a bare 500.
func TestApply_UnknownField_SaysStrictFieldValidationRefusedIt(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	manifest := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"` + ns + `"},"colour":1}`
	msg := applyFailure(t, env, []byte(manifest))
	if !strings.Contains(msg, "strict field validation") || !strings.Contains(msg, ".colour") || !strings.Contains(msg, "schema") {
		t.Errorf("Apply of a ConfigMap with a field colour: failure %q, want it to name strict field validation and .colour", msg)
	}
}

// recordTB records what Errorf and Fatalf say (Fatalf ends the goroutine)
// and runs its cleanups when told.
type recordTB struct {
	testing.TB
	mu       sync.Mutex
	msgs     []string
	cleanups []func()
}

func (r *recordTB) Helper() {}
func (r *recordTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recordTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordTB) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// A Manager whose Start fails at once fails the test with why: at once, or
// at the latest when it is stopped.
func TestStartManager_StartFails_FailsTheTestWithWhy(t *testing.T) {
	env := kctltest.Start(t)
	tb := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tb.cleanup()
		env.StartManager(tb, kctl.Options{}, func(mgr *kctl.Manager) error {
			return mgr.Add(kctl.Runnable{Name: "broken", Run: func(context.Context) error { return errors.New("broken on purpose") }})
		})
	}()
	<-done
	if msgs := strings.Join(tb.msgs, "\n"); !strings.Contains(msgs, "broken on purpose") {
		t.Errorf("StartManager of a Manager whose runnable fails at once: failures %q, want its error", msgs)
	}
}

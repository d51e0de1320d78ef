package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Issue 25, item 1: WithReconcileTimeout ends a reconcile's context, counts
// it in controller_runtime_reconcile_timeouts_total, and retries the key.
func TestController_ReconcileTimeout_EndsTheContextCountsAndRetries(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	mgr := testManager(t, cfg, ns, Options{Logger: logger})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	var causes []string
	var ctxErr error
	c := NewController(mgr, "timeout", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		causes = append(causes, tr.Cause)
		first := len(causes) == 1
		mu.Unlock()
		if !first {
			return Result{}, nil
		}
		<-ctx.Done() // the timeout ends it
		mu.Lock()
		ctxErr = ctx.Err()
		mu.Unlock()
		return Result{}, nil
	})
	c.WithReconcileTimeout(100 * time.Millisecond)
	startManager(t, mgr)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the retry after the timeout", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(causes) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(ctxErr, context.DeadlineExceeded) {
		t.Errorf("reconcile's ctx.Err() = %v, want DeadlineExceeded", ctxErr)
	}
	if causes[1] != "retry" {
		t.Errorf("the reconcile after the timeout has trigger %q, want retry", causes[1])
	}
	page := scrapeMetrics(t, mgr.metrics.Handler())
	want := `controller_runtime_reconcile_timeouts_total{controller="timeout"} 1`
	if !strings.Contains(page, want) {
		t.Errorf("metrics page lacks %s:\n%s", want, onlyFamilies(page, "controller_runtime_reconcile_t"))
	}
	lines := logs.linesEventually(t, "ran past its timeout of 100ms (WithReconcileTimeout)", 1)
	if !strings.Contains(lines[0], "will retry") {
		t.Errorf("the timeout's log line is not a retry: %s", lines[0])
	}
}

func TestController_ReconcileTimeout_NegativeIsAnErrorFromStart(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	c := NewController(mgr, "neg", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	c.WithReconcileTimeout(-time.Second)
	err := mgr.Start(startCheckCtx(t))
	if err == nil || !strings.Contains(err.Error(), "WithReconcileTimeout(-1s) must not be negative") {
		t.Errorf("Start = %v, want the negative timeout named", err)
	}
}

// Issue 33, item 10: a reconcile that runs past its timeout is handled
// and recorded as one outcome (outcomeOf). One that returns a Terminal
// error is terminal, as WithReconcileTimeout documents ("a Terminal error
// it returned stays terminal"): not retried, counted as a timeout and as
// a terminal error, and recorded as "terminal", not "timeout". One that
// returns a Conflict is a timeout, retried as an error: not a Conflict
// retried quietly while its history says "timeout".
func TestController_ReconcileTimeout_HandledAsItsHistorySays(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	mgr.KeepHistory(HistoryOptions{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	// Controller name is late with the ConfigMap of its name, returning
	// err once the timeout ends its context; it reconciles the others at once.
	lateWith := func(name string, err error) {
		c := NewController(mgr, name, func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
			if cm.Name != name {
				return Result{}, nil
			}
			<-ctx.Done()
			return Result{}, err
		})
		c.WithReconcileTimeout(100 * time.Millisecond)
	}
	lateWith("terminal", Terminal(errors.New("bad spec")))
	lateWith("conflict", apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "conflict", errors.New("stale")))
	startManager(t, mgr)
	for _, name := range []string{"terminal", "conflict"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cms.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	history := func(name string) KeyHistory {
		h, err := mgr.History(name, Key{Namespace: ns, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	var h KeyHistory
	eventually(t, "the terminal key reconciled and handled", func() bool {
		h = history("terminal")
		return len(h.Reconciles) > 0 && h.State.InFlightSince.IsZero()
	})
	got := h.Reconciles[0]
	if got.Result != "terminal" || !strings.Contains(got.Error, "ran past its timeout") {
		t.Errorf("history of a timed-out reconcile that returned Terminal: result %q, error %q; want terminal, and the timeout named", got.Result, got.Error)
	}
	if s := h.State; s.WaitingFor != "" || s.BackoffAttempt != 0 {
		t.Errorf("state of the terminal key = %+v, want no wait and no backoff: a Terminal error is not retried", s)
	}
	eventually(t, "the conflict key retried", func() bool {
		return len(history("conflict").Reconciles) >= 2
	})
	if got := history("conflict").Reconciles[0]; got.Result != "timeout" {
		t.Errorf("history of a timed-out reconcile that returned a Conflict: result %q, want timeout", got.Result)
	}
	page := samples(scrapeMetrics(t, mgr.metrics.Handler()))
	for series, want := range map[string]string{
		`controller_runtime_reconcile_timeouts_total{controller="terminal"}`:         "1",
		`controller_runtime_terminal_reconcile_errors_total{controller="terminal"}`:  "1",
		`kctl_reconcile_conflicts_total{controller="conflict"}`:                      "0",
		`controller_runtime_reconcile_total{controller="conflict",result="requeue"}`: "0",
	} {
		if page[series] != want {
			t.Errorf("%s = %q, want %s", series, page[series], want)
		}
	}
}

// outcomeOf is the one table of the reconcile contract: a Terminal error
// wins over the timeout, the timeout over a Conflict.
func TestOutcomeOf_FirstRowThatMatchesDecides(t *testing.T) {
	timedOut := func(err error) error { // as reconcileTimed wraps one
		return fmt.Errorf("kctl: reconcile ran past its timeout: %w; it returned: %w", errTimedOut, unprefixed(err))
	}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("stale"))
	bad := Terminal(errors.New("bad spec"))
	for _, tc := range []struct {
		attempt int
		res     Result
		err     error
		want    outcome
	}{
		{1, Result{}, nil, outcomeSuccess},
		{1, Result{RequeueAfter: time.Second}, nil, outcomeRequeueAfter},
		{1, Result{RequeueAfter: time.Second}, errors.New("x"), outcomeError},
		{1, Result{}, conflict, outcomeConflict},
		{quietConflicts, Result{}, conflict, outcomeError},
		{1, Result{}, bad, outcomeTerminal},
		{1, Result{}, timedOut(nil), outcomeTimeout},
		{1, Result{}, timedOut(conflict), outcomeTimeout},
		{1, Result{}, timedOut(bad), outcomeTerminal},
	} {
		got := outcomeOf(Trigger{Attempt: tc.attempt}, tc.res, tc.err)
		if got != tc.want {
			t.Errorf("outcomeOf(attempt %d, %+v, %v) = %s, want %s", tc.attempt, tc.res, tc.err, got, tc.want)
		}
	}
}

// Issue 25, item 5: Enqueue and a source's events choose their priority.
func TestController_PriorityChosenByEnqueueAndBySource(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []string
	c := NewKeyController(mgr, "priority", func(ctx context.Context, k Key) (Result, error) {
		if k.Name == "gate" {
			<-gate
			return Result{}, nil
		}
		mu.Lock()
		order = append(order, k.Name)
		mu.Unlock()
		return Result{}, nil
	})
	Watches(c, func(cm *corev1.ConfigMap) []Key { return []Key{{Name: cm.Name}} })
	c.WithPriority(func(e ObjectEvent) Priority {
		if strings.HasPrefix(e.Object.GetName(), "low") {
			return PriorityLow
		}
		return PriorityNormal
	})
	startManager(t, mgr)
	c.Enqueue(Key{Name: "gate"})
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.queue == nil {
			return 0
		}
		return c.queue.Len()
	}
	busy := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.active) == 1
	}
	eventually(t, "the gate reconciles", busy)
	c.EnqueueWithPriority(Key{Name: "manual-low"}, PriorityLow)
	c.Enqueue(Key{Name: "manual-normal"})
	for _, name := range []string{"low-cm", "normal-cm"} {
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "four keys queued behind the gate", func() bool { return queued() == 4 })
	close(gate)
	eventually(t, "four reconciles", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 4
	})
	want := []string{"manual-normal", "normal-cm", "manual-low", "low-cm"}
	if !slices.Equal(order, want) {
		t.Errorf("reconciled in order %v, want %v (normal before low, each in FIFO order)", order, want)
	}
}

// Issue 25, item 2: a controller of keys that name no object, fed by
// Watches, FromChannel and Enqueue, retried with backoff and counted.
func TestKeyController_ReconcilesKeysThatNameNoObject(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	pods := ClientFor[corev1.Pod](mgr)
	var mu sync.Mutex
	runs := map[string][]string{} // key -> causes
	failed := false
	c := NewKeyController(mgr, "summary", func(ctx context.Context, k Key) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		defer mu.Unlock()
		runs[k.String()] = append(runs[k.String()], tr.Cause)
		if k.Name == "flaky" && !failed {
			failed = true
			return Result{}, errors.New("not yet")
		}
		return Result{}, nil
	})
	summary := Key{Namespace: ns, Name: "pod-summary"}
	Watches(c, func(p *corev1.Pod) []Key { return []Key{summary} })
	ticks := make(chan string, 1)
	FromChannel(c, ticks, nil, func(s string) []Key { return []Key{{Name: s}} })
	c.Enqueue(Key{Name: "flaky"}) // before Start: kept until the controller runs
	startManager(t, mgr)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	if err := pods.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	ticks <- "external"
	causes := func(k string) []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), runs[k]...)
	}
	eventually(t, "every key reconciled", func() bool {
		return len(causes(summary.String())) > 0 && len(causes("external")) > 0 && len(causes("flaky")) >= 2
	})
	if got := causes(summary.String()); !strings.Contains(strings.Join(got, " "), "mapped") {
		t.Errorf("causes of %s = %v, want mapped", summary, got)
	}
	if got := causes("external"); got[0] != "channel" {
		t.Errorf("causes of external = %v, want channel", got)
	}
	if got := causes("flaky"); got[0] != "manual" || got[1] != "retry" {
		t.Errorf("causes of flaky = %v, want manual, then retry", got)
	}
	page := scrapeMetrics(t, mgr.metrics.Handler())
	for _, want := range []string{
		`controller_runtime_reconcile_total{controller="summary",result="error"} 1`,
		`workqueue_retries_total{controller="summary",name="summary"} 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics page lacks %s", want)
		}
	}
}

func TestKeyController_Owns_IsAnErrorFromStart(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	c := NewKeyController(mgr, "keys", func(ctx context.Context, k Key) (Result, error) { return Result{}, nil })
	Owns[corev1.Pod](c)
	err := mgr.Start(startCheckCtx(t))
	if err == nil || !strings.Contains(err.Error(), "Owns on a controller of keys") {
		t.Errorf("Start = %v, want Owns on a key controller named", err)
	}
}

// Issue 35, item 4: WithMiddleware wraps every reconcile, the first
// middleware given outermost and a later call's inside; a middleware gets
// the reconcile's own copy of the object, can skip the reconcile, and its
// panic is an error, retried.
func TestController_WithMiddleware_WrapsEveryReconcileInOrder(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	steps := map[string][]string{} // by ConfigMap name
	note := func(name, step string) {
		mu.Lock()
		defer mu.Unlock()
		steps[name] = append(steps[name], step)
	}
	named := func(label string) func(next ReconcileFunc[corev1.ConfigMap]) ReconcileFunc[corev1.ConfigMap] {
		return func(next ReconcileFunc[corev1.ConfigMap]) ReconcileFunc[corev1.ConfigMap] {
			return func(ctx context.Context, k Key, obj *corev1.ConfigMap) (Result, error) {
				tr, _ := TriggerFrom(ctx)
				note(k.Name, fmt.Sprintf("%s> attempt %d", label, tr.Attempt))
				res, err := next(ctx, k, obj)
				note(k.Name, "<"+label)
				return res, err
			}
		}
	}
	panicked := false // reconciles run on one worker: no two at once
	edits := func(next ReconcileFunc[corev1.ConfigMap]) ReconcileFunc[corev1.ConfigMap] {
		return func(ctx context.Context, k Key, obj *corev1.ConfigMap) (Result, error) {
			switch {
			case k.Name == "skipped":
				return Result{}, nil
			case k.Name == "panics" && !panicked:
				panicked = true
				panic("the middleware's bug")
			case obj != nil:
				obj.Annotations = map[string]string{"seen-by": "middleware"}
			}
			return next(ctx, k, obj)
		}
	}
	c := NewController(mgr, "wrapped", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		note(cm.Name, "reconcile sees "+cm.Annotations["seen-by"])
		return Result{}, nil
	})
	c.WithMiddleware(named("A"), named("B"))
	c.WithMiddleware(named("C"), edits)
	startManager(t, mgr)
	for _, name := range []string{"plain", "skipped", "panics"} {
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{
		"plain":   {"A> attempt 1", "B> attempt 1", "C> attempt 1", "reconcile sees middleware", "<C", "<B", "<A"},
		"skipped": {"A> attempt 1", "B> attempt 1", "C> attempt 1", "<C", "<B", "<A"},
		"panics": {"A> attempt 1", "B> attempt 1", "C> attempt 1", // the panic unwinds to the read step
			"A> attempt 2", "B> attempt 2", "C> attempt 2", "reconcile sees middleware", "<C", "<B", "<A"},
	}
	eventually(t, "each ConfigMap's reconcile through the middlewares", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for name, w := range want {
			if len(steps[name]) < len(w) {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for name, w := range want {
		if !slices.Equal(steps[name], w) {
			t.Errorf("%s: steps %q, want %q", name, steps[name], w)
		}
	}
}

func TestController_WithMiddleware_NilIsAnErrorFromStart(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	c := NewController(mgr, "nil-mw", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	c.WithMiddleware(nil)
	err := mgr.Start(startCheckCtx(t))
	if err == nil || !strings.Contains(err.Error(), "WithMiddleware was given a nil middleware") {
		t.Errorf("Start = %v, want the nil middleware named", err)
	}
}

// Issue 35, item 5: QueuedAgain's channel closes when the running
// reconcile's key is queued again (a change of its object, Enqueue), and
// the next reconcile follows at once; it is nil outside a reconcile.
func TestQueuedAgain_ClosesWhenTheKeyIsQueuedWhileItRuns(t *testing.T) {
	if QueuedAgain(t.Context()) != nil {
		t.Errorf("QueuedAgain outside a reconcile is not nil")
	}
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	running := make(chan string, 10) // the trigger of each reconcile, as it starts
	var mu sync.Mutex
	var ends []string
	c := NewController(mgr, "cut-short", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		running <- tr.Cause
		end := "done"
		if len(cm.Data) == 0 { // the first two wait to be cut short
			select {
			case <-QueuedAgain(ctx):
				end = "queued again"
			case <-ctx.Done():
				end = "context ended"
			}
		}
		mu.Lock()
		ends = append(ends, tr.Cause+": "+end)
		mu.Unlock()
		return Result{}, nil
	})
	startManager(t, mgr)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "long"}}
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	started := func(want ...string) {
		t.Helper()
		select {
		case got := <-running:
			if !slices.Contains(want, got) {
				t.Fatalf("a reconcile with trigger %q started, want one of %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no reconcile (%q) started within 30s", want)
		}
	}
	started("initial", "created")
	c.Enqueue(Key{Namespace: ns, Name: "long"}) // closes the first one's channel
	started("manual")
	cm.Data = map[string]string{"a": "1"} // closes the second one's
	if err := cms.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	started("updated")
	eventually(t, "three reconciles ended", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ends) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"queued again", "queued again", "done"}
	for i, e := range ends {
		if !strings.HasSuffix(e, ": "+want[i]) {
			t.Errorf("reconciles ended %q, want %q in turn", ends, want)
			break
		}
	}
}

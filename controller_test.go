package kctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

// Tests of the controller's builder and sources (controller.go).

// TestController_WithEventFilter_FiltersOwnedAndWatchedObjectsToo backs
// WithEventFilter's promise to filter every object source, not only T's own
// events: an unlabelled owned Pod and an unlabelled watched Secret enqueue
// nothing; labelled ones do.
func TestController_WithEventFilter_FiltersOwnedAndWatchedObjectsToo(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var log reconcileLog
	labelled := func(e ObjectEvent) bool { return e.Object.GetLabels()["watch"] == "yes" }
	c := NewController(mgr, "filtered-sources", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	c.WithEventFilter(labelled)
	Owns[corev1.Pod](c)
	Watches(c, func(s *corev1.Secret) []Key { return []Key{{s.Namespace, "owner"}} })
	startManager(t, mgr)

	ctx := t.Context()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner", Labels: map[string]string{"watch": "yes"}}}
	if err := ClientFor[corev1.ConfigMap](mgr).Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the owner reconciled", func() bool { return len(log.causes(ns+"/owner")) > 0 })
	// In each source the dropped object comes first: were it not filtered,
	// its trigger would be the first one recorded (the first cause wins).
	pods := NewClient[corev1.Pod](mgr.conn)
	for _, name := range []string{"dropped", "passed"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}
		if name == "passed" {
			pod.Labels = map[string]string{"watch": "yes"}
		}
		if err := SetControllerReference(owner, pod); err != nil {
			t.Fatal(err)
		}
		if err := pods.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "an owned reconcile", func() bool { return log.saw(ns+"/owner", "owned") })
	secrets := NewClient[corev1.Secret](mgr.conn)
	for _, name := range []string{"dropped", "passed"} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if name == "passed" {
			secret.Labels = map[string]string{"watch": "yes"}
		}
		if err := secrets.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a mapped reconcile", func() bool { return log.saw(ns+"/owner", "mapped") })

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, tr := range log.triggers[ns+"/owner"] {
		if tr.Cause == "owned" && !strings.HasPrefix(tr.Detail, "Pod "+ns+"/passed ") {
			t.Errorf("owned trigger %+v: want only the labelled Pod's event to pass the filter", tr)
		}
		if tr.Cause == "mapped" && !strings.HasPrefix(tr.Detail, "Secret "+ns+"/passed ") {
			t.Errorf("mapped trigger %+v: want only the labelled Secret's event to pass the filter", tr)
		}
	}
}

// TestController_BuilderCallAfterStart_IsIgnoredAndLoggedAsError backs the
// promise on Controller: once it has started, its configuration is fixed
// (MaxConcurrentReconciles stays at its default, 1, and a predicate that
// drops everything does not apply), and each late call is an ERROR log line.
func TestController_BuilderCallAfterStart_IsIgnoredAndLoggedAsError(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))})
	var log reconcileLog
	c := NewController(mgr, "late-builder", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	startManager(t, mgr)
	ctx := t.Context()
	cms := ClientFor[corev1.ConfigMap](mgr)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a reconciled", func() bool { return len(log.causes(ns+"/a")) > 0 })
	workers := `controller_runtime_max_concurrent_reconciles{controller="late-builder"} 1`
	if page := scrapeMetrics(t, mgr.metrics.Handler()); !strings.Contains(page, workers) {
		t.Errorf("the metrics page has no %q (the default)", workers)
	}

	c.MaxConcurrentReconciles(3)
	c.WithPredicates(func(ObjectEvent) bool { return false })
	Owns[corev1.Secret](c)
	c.MaxConcurrentReconciles(0) // a builder mistake after Start: Start cannot return it
	for _, want := range []string{
		"MaxConcurrentReconciles on a controller that has started is ignored",
		"WithPredicates on a controller that has started is ignored",
		"owned source on a controller that has started is ignored",
		"MaxConcurrentReconciles(0) must be at least 1 (made after Manager.Start",
	} {
		found := false
		for line := range strings.Lines(logs.String()) {
			found = found || strings.Contains(line, "level=ERROR") && strings.Contains(line, want)
		}
		if !found {
			t.Errorf("no ERROR log line says %q", want)
		}
	}
	c.mu.Lock()
	n := c.workers
	c.mu.Unlock()
	if n != 1 {
		t.Errorf("workers = %d after a late MaxConcurrentReconciles(3), want 1", n)
	}
	secrets, err := ResourceOf[corev1.Secret]()
	if err != nil {
		t.Fatal(err)
	}
	mgr.cache.mu.Lock()
	_, watched := mgr.cache.informers[secrets]
	mgr.cache.mu.Unlock()
	if watched {
		t.Error("a late Owns[Secret], ignored, made an informer of Secrets anyway")
	}
	cm.Data = map[string]string{"k": "v"}
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an update reconciled despite the late predicate", func() bool { return log.saw(ns+"/a", "updated") })
}

// TestFromChannel_Closed_EndsTheSourceAndTheControllerGoesOn backs FromChannel's
// "closing the channel ends the source": the source's goroutine returns (it
// does not spin on the closed channel), the controller still reconciles, and
// the Manager neither stops nor logs an error.
func TestFromChannel_Closed_EndsTheSourceAndTheControllerGoesOn(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))})
	var log reconcileLog
	c := NewController(mgr, "closed-channel", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	ch := make(chan string)
	FromChannel(c, ch, nil, func(s string) []Key { return []Key{{ns, s}} })
	stop := startManager(t, mgr)
	ctx := t.Context()
	for _, name := range []string{"a", "b"} {
		if err := ClientFor[corev1.ConfigMap](mgr).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ch <- "a":
	case <-time.After(30 * time.Second):
		t.Fatal("the channel source did not read within 30s")
	}
	eventually(t, "a reconciled from the channel", func() bool { return log.saw(ns+"/a", "channel") })
	const source = "channel source of closed-channel"
	mgr.mu.Lock()
	work := mgr.work // the every-replica runnables' group
	mgr.mu.Unlock()
	sourceRuns := func() bool { return slices.Contains(work.Running(), source) }
	if !sourceRuns() {
		t.Fatalf("%q is not among the work that runs on every replica", source)
	}

	close(ch)
	pollWithin(t, 10*time.Second, "the channel source returns", func() bool { return !sourceRuns() })
	c.Enqueue(Key{ns, "b"})
	eventually(t, "b reconciled after the channel closed", func() bool { return log.saw(ns+"/b", "manual") })
	if err := stop(); err != nil {
		t.Errorf("Start returned %v, want nil", err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the Manager logged an error, want none:\n%s", logs.String())
	}
}

// TestFromChannel_AfterTheControllerStarted_ReadsAtOnce backs the exception
// on Controller: unlike the other builder calls, FromChannel after the
// controller has started is not ignored.
func TestFromChannel_AfterTheControllerStarted_ReadsAtOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var log reconcileLog
	c := NewController(mgr, "late-channel", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	startManager(t, mgr)
	if err := ClientFor[corev1.ConfigMap](mgr).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a reconciled", func() bool { return len(log.causes(ns+"/a")) > 0 })

	ch := make(chan string)
	FromChannel(c, ch, nil, func(s string) []Key { return []Key{{ns, s}} })
	select {
	case ch <- "a":
	case <-time.After(30 * time.Second):
		t.Fatal("the channel source added after the controller started did not read within 30s")
	}
	eventually(t, "a reconciled from the channel", func() bool { return log.saw(ns+"/a", "channel") })
}

// Enqueue of a key whose object is not in the cache runs neither reconcile
// nor OnDelete: OnDelete runs only for a delete the controller saw and has
// not handed to it yet. Neither a key that never named an object nor one
// whose delete OnDelete already had is treated as a new delete.
func TestController_EnqueueOfAKeyNotInTheCache_RunsNeitherReconcileNorOnDelete(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	var reconciles, deletes []string // "name cause", in order
	c := NewController(mgr, "enqueue", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		defer mu.Unlock()
		reconciles = append(reconciles, cm.Name+" "+tr.Cause)
		return Result{}, nil
	}) // one worker: keys are reconciled one at a time, in the order queued
	c.OnDelete(func(ctx context.Context, cm *corev1.ConfigMap) {
		mu.Lock()
		defer mu.Unlock()
		deletes = append(deletes, cm.Name)
	})
	startManager(t, mgr)
	saw := func(list *[]string, entry string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(*list, entry) }
	}
	for _, name := range []string{"present", "gone"} {
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		// created before or after the controller's first run: either cause
		eventually(t, name+" reconciled", func() bool { return saw(&reconciles, name+" created")() || saw(&reconciles, name+" initial")() })
	}
	if err := cms.Delete(t.Context(), ns, "gone"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OnDelete of gone", saw(&deletes, "gone"))
	mu.Lock()
	before := len(reconciles)
	mu.Unlock()

	c.Enqueue(Key{ns, "never"})
	c.Enqueue(Key{ns, "gone"})
	c.Enqueue(Key{ns, "present"})
	// present was queued last: once it is reconciled, never and gone have been handled.
	eventually(t, "the manual reconcile of present", saw(&reconciles, "present manual"))
	mu.Lock()
	defer mu.Unlock()
	if got := reconciles[before:]; !slices.Equal(got, []string{"present manual"}) {
		t.Errorf("after Enqueue(never), Enqueue(gone), Enqueue(present): reconciles %q, want only [present manual]", got)
	}
	if !slices.Equal(deletes, []string{"gone"}) {
		t.Errorf("OnDelete ran for %q, want once, for the delete of gone", deletes)
	}
}

// Issue 25, item 12: after a reconcile asks for a requeue (RequeueAfter, or
// an error's retry), the next reconcile that an event causes is reported
// with the event's cause, and its wait counts from the event.
func TestController_EventAfterARequeue_IsTheTrigger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result func() (Result, error)
	}{
		{"requeue-after", func() (Result, error) { return Result{RequeueAfter: time.Hour}, nil }},
		{"retry", func() (Result, error) { return Result{}, errors.New("not yet") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			mgr := testManager(t, cfg, ns, Options{})
			cms := ClientFor[corev1.ConfigMap](mgr)
			var log reconcileLog
			var calls atomic.Int32
			c := NewController(mgr, "trigger", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
				defer log.record(ctx, Key{cm.Namespace, cm.Name})()
				if calls.Add(1) == 1 {
					return tc.result()
				}
				return Result{}, nil
			})
			// A retry an hour away: only the event can bring the key back.
			c.WithRateLimiter(NewRateLimiter[Key](time.Hour, time.Hour, 10, 100))
			startManager(t, mgr)

			ctx := t.Context()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
			if err := cms.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the first reconcile", func() bool { return calls.Load() >= 1 })
			patched := time.Now()
			patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
			if err := cms.Patch(ctx, cm, MergePatch, patch, PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the reconcile of the update", func() bool { return calls.Load() >= 2 })
			log.mu.Lock()
			got := slices.Clone(log.triggers[ns+"/a"])
			log.mu.Unlock()
			last := got[len(got)-1]
			if last.Cause != "updated" || last.Detail != "labels" {
				t.Errorf("trigger after the %s = %q %q, want %q %q", tc.name, last.Cause, last.Detail, "updated", "labels")
			}
			if since := time.Since(patched); last.Waited > since {
				t.Errorf("trigger waited %v, more than the %v since the update: counted from the requeue", last.Waited, since)
			}
		})
	}
}

// offlineManager is a Manager whose connection goes nowhere: for tests that
// drive a controller's handlers by hand and never start it.
func offlineManager(t testing.TB) *Manager {
	t.Helper()
	m, err := NewManager(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

// Issue 15 item 11: keys queued by a periodic resync went at normal priority,
// ahead of the live changes that came after them.
func TestController_ResyncKeys_QueueBehindLiveChanges(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "resync", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q // as run does, without starting the controller
	cm := func(name string) *corev1.ConfigMap { return storeCM("ns", name, "1", nil) }
	resync := func(name string) {
		obj := cm(name)
		c.onEvent(event[*corev1.ConfigMap]{Type: Updated, Object: obj, Old: obj, Resync: true})
	}
	resync("resync-a")
	resync("resync-b")
	c.onEvent(event[*corev1.ConfigMap]{Type: Updated, Object: cm("live"), Old: storeCM("ns", "live", "0", nil)})
	c.onEvent(event[*corev1.ConfigMap]{Type: Added, Object: cm("created")})

	want := []string{"ns/live", "ns/created", "ns/resync-a", "ns/resync-b"}
	for step, w := range want {
		k, shutdown := q.Get()
		if shutdown || k.String() != w {
			t.Fatalf("step %d: q.Get() = %v, %v; want %s (resync keys go behind live changes)", step, k, shutdown, w)
		}
		q.Done(k)
	}
}

// The same for the keys a Watches source maps a resync to: an unchanged
// object's old keys are not queued again at normal priority.
func TestController_ResyncOfAWatchedType_QueuesBehindLiveChanges(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "resync", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	secrets, err := InformerFor[corev1.Secret](m.cache)
	if err != nil {
		t.Fatal(err)
	}
	Watches(c, func(s *corev1.Secret) []Key { return []Key{{s.Namespace, "from-" + s.Name}} })
	secrets.mu.Lock()
	before := len(secrets.handlers)
	secrets.mu.Unlock()
	for _, connect := range c.connects { // what the controller's first run does
		connect()
	}
	secrets.mu.Lock()
	handlers := secrets.handlers[before:]
	secrets.mu.Unlock()
	if len(handlers) != 1 {
		t.Fatalf("Watches added %d handlers to the Secret informer, want 1", len(handlers))
	}
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q
	s := &corev1.Secret{}
	s.Namespace, s.Name, s.ResourceVersion = "ns", "resynced", "1"
	handlers[0].fn(event[*corev1.Secret]{Type: Updated, Object: s, Old: s, Resync: true})
	c.onEvent(event[*corev1.ConfigMap]{Type: Added, Object: storeCM("ns", "live", "1", nil)})

	want := []string{"ns/live", "ns/from-resynced"}
	for step, w := range want {
		k, shutdown := q.Get()
		if shutdown || k.String() != w {
			t.Fatalf("step %d: q.Get() = %v, %v; want %s (resync keys go behind live changes)", step, k, shutdown, w)
		}
		q.Done(k)
	}
}

// Issue 33, item 9: the metrics page counts what controller-runtime
// counts. A reconcile that panics is counted in
// controller_runtime_reconcile_panics_total and retried as an error; one
// that returns a Terminal error is counted in
// controller_runtime_terminal_reconcile_errors_total and not retried.
// Both are errors of reconcile_errors_total, as in controller-runtime.
func TestControllerMetrics_PanicAndTerminal_AreCountedOnThePage(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var mu sync.Mutex
	causes := map[string][]string{}
	NewController(mgr, "counted", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		causes[cm.Name] = append(causes[cm.Name], tr.Cause)
		n := len(causes[cm.Name])
		mu.Unlock()
		switch {
		case cm.Name == "panics" && n == 1:
			panic("boom")
		case cm.Name == "terminal":
			return Result{}, Terminal(errors.New("bad spec"))
		}
		return Result{}, nil
	})
	startManager(t, mgr)
	ctx := t.Context()
	reconciled := func(name string, n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(causes[name]) >= n
		}
	}
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// Once the controller runs, each object below is queued by its one
	// event only, so the counts are exact.
	create("ready")
	eventually(t, "the controller to run", reconciled("ready", 1))
	create("panics")
	create("terminal")
	eventually(t, "the panic retried", reconciled("panics", 2))
	eventually(t, "the terminal error", reconciled("terminal", 1))

	want := map[string]int{
		`controller_runtime_reconcile_panics_total{controller="counted"}`:                 1,
		`controller_runtime_terminal_reconcile_errors_total{controller="counted"}`:        1,
		`controller_runtime_reconcile_errors_total{controller="counted"}`:                 2,
		`controller_runtime_reconcile_total{controller="counted",result="error"}`:         2,
		`controller_runtime_reconcile_total{controller="counted",result="success"}`:       2,
		`controller_runtime_reconcile_timeouts_total{controller="counted"}`:               0,
		`controller_runtime_reconcile_total{controller="counted",result="requeue"}`:       0,
		`controller_runtime_reconcile_total{controller="counted",result="requeue_after"}`: 0,
	}
	// Each result is counted after its reconcile returns: wait for the
	// last ones, then read the page once.
	const errs = `controller_runtime_reconcile_total{controller="counted",result="error"}`
	const oks = `controller_runtime_reconcile_total{controller="counted",result="success"}`
	var page string
	eventually(t, "two errors and two successes counted", func() bool {
		page = scrapeMetrics(t, mgr.metrics.Handler())
		got := samples(page)
		return got[errs] == "2" && got[oks] == "2"
	})
	got := samples(page)
	for series, v := range want {
		if s, ok := got[series]; !ok || s != strconv.Itoa(v) {
			t.Errorf("%s = %q, want %d", series, s, v)
		}
	}
	if t.Failed() {
		t.Logf("the page's counters:\n%s", onlyFamilies(page, "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors", "controller_runtime_terminal", "controller_runtime_reconcile_panics"))
	}
	mu.Lock()
	defer mu.Unlock()
	if got := causes["panics"]; len(got) != 2 || got[1] != "retry" {
		t.Errorf("triggers of the panicking key = %v, want a first one, then retry", got)
	}
	if got := causes["terminal"]; len(got) != 1 {
		t.Errorf("triggers of the terminal key = %v, want one: a Terminal error is not retried", got)
	}
}

// Issue 25, item 3: NeedLeader(false) runs a controller on every replica,
// while the others run only on the leader. A FromChannel reader runs on
// every replica either way: a standby reads its channel (a sender is not
// held up) and keeps the keys until it leads.
func TestController_NeedLeaderFalse_RunsOnEveryReplica(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}
	if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	type replica struct {
		led, ledChannel, everywhere, channel atomic.Int32
		sends                                chan string // unbuffered
	}
	replicas := make([]*replica, 2)
	for i := range replicas {
		r := &replica{sends: make(chan string)}
		replicas[i] = r
		var logs logBuffer
		mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := mgr.ElectLeader(apiLeaderElection(ns, fmt.Sprint("r", i))); err != nil {
			t.Fatal(err)
		}
		led := NewController(mgr, "led", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
			if tr, _ := TriggerFrom(ctx); tr.Cause == "channel" {
				r.ledChannel.Add(1)
			}
			r.led.Add(1)
			return Result{}, nil
		})
		FromChannel(led, r.sends, nil, func(string) []Key { return []Key{{ns, "work"}} })
		ch := make(chan string, 1)
		ch <- "tick"
		c := NewController(mgr, "everywhere", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
			if tr, _ := TriggerFrom(ctx); tr.Cause == "channel" {
				r.channel.Add(1)
			}
			r.everywhere.Add(1)
			return Result{}, nil
		})
		c.NeedLeader(false)
		FromChannel(c, ch, nil, func(string) []Key { return []Key{{ns, "work"}} })
		startManager(t, mgr)
	}
	eventually(t, "every replica reconciles, from the cache and the channel", func() bool {
		for _, r := range replicas {
			if r.everywhere.Load() == 0 || r.channel.Load() == 0 {
				return false
			}
		}
		return true
	})
	// The leader's replay of work is done, so the tick's key is queued
	// afresh and its reconcile's cause is "channel", not a merged one.
	eventually(t, "the leader reconciles", func() bool {
		return replicas[0].led.Load()+replicas[1].led.Load() > 0
	})
	for i, r := range replicas {
		select {
		case r.sends <- "tick":
		case <-time.After(30 * time.Second):
			t.Fatalf("replica %d did not read the leader-only controller's channel in 30s: every replica reads it", i)
		}
	}
	eventually(t, "the leader reconciles the channel's key", func() bool {
		return replicas[0].ledChannel.Load()+replicas[1].ledChannel.Load() > 0
	})
	// The standby's caches have synced (its every-replica controller ran):
	// had it run the leader-only one too, that would have reconciled.
	if replicas[0].led.Load() > 0 && replicas[1].led.Load() > 0 {
		t.Error("both replicas ran the leader-only controller")
	}
}

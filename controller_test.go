package kctl

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	sourceRuns := func() bool {
		mgr.mu.Lock()
		term := mgr.term
		mgr.mu.Unlock()
		for _, name := range term.Running() {
			if name == source {
				return true
			}
		}
		return false
	}
	if !sourceRuns() {
		t.Fatalf("%q is not among the leader work that runs", source)
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

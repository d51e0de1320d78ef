package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func testReplicaSet(ns, name string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func ownedPod(rs *appsv1.ReplicaSet, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels},
		Spec:       rs.Spec.Template.Spec,
	}
	if err := SetControllerReference(rs, p); err != nil {
		panic(err)
	}
	return p
}

// podCount is the seed example: label each ReplicaSet with the number of its Pods.
func podCount(pods *Client[corev1.Pod], rsets *Client[appsv1.ReplicaSet]) func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return Result{}, Terminal(err)
		}
		list, err := pods.List(ctx, ListOptions{Namespace: rs.Namespace, Labels: sel})
		if err != nil {
			return Result{}, err
		}
		n := strconv.Itoa(len(list))
		if rs.Labels["pod-count"] == n {
			return Result{}, nil
		}
		if rs.Labels == nil {
			rs.Labels = map[string]string{}
		}
		rs.Labels["pod-count"] = n
		return Result{}, rsets.Update(ctx, rs)
	}
}

func TestController_PodCount_LabelsFollowOwnedPods(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	pods, rsets := ClientFor[corev1.Pod](mgr), ClientFor[appsv1.ReplicaSet](mgr)
	c := NewController(mgr, "podcount", podCount(pods, rsets))
	Owns[corev1.Pod](c)
	startManager(t, mgr)

	ctx := t.Context()
	rs := testReplicaSet(ns, "web")
	if err := rsets.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	wantLabel := func(want string) {
		t.Helper()
		eventually(t, "pod-count="+want, func() bool {
			got, err := rsets.Uncached().Get(ctx, ns, "web")
			return err == nil && got.Labels["pod-count"] == want
		})
	}
	wantLabel("0")
	for i := range 3 {
		if err := pods.Create(ctx, ownedPod(rs, fmt.Sprintf("web-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	wantLabel("3")
	if err := pods.Delete(ctx, ns, "web-1"); err != nil {
		t.Fatal(err)
	}
	wantLabel("2")
}

// reconcileLog records reconciles and their triggers, and counts how many
// run at once.
type reconcileLog struct {
	mu       sync.Mutex
	triggers map[string][]Trigger // by key
	running  atomic.Int32
	maxSeen  atomic.Int32
}

func (l *reconcileLog) record(ctx context.Context, k Key) func() {
	n := l.running.Add(1)
	for {
		m := l.maxSeen.Load()
		if n <= m || l.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	tr, _ := TriggerFrom(ctx)
	l.mu.Lock()
	if l.triggers == nil {
		l.triggers = map[string][]Trigger{}
	}
	l.triggers[k.String()] = append(l.triggers[k.String()], tr)
	l.mu.Unlock()
	return func() { l.running.Add(-1) }
}

func (l *reconcileLog) causes(k string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, t := range l.triggers[k] {
		out = append(out, t.Cause)
	}
	return out
}

func (l *reconcileLog) saw(k, cause string) bool {
	for _, c := range l.causes(k) {
		if c == cause {
			return true
		}
	}
	return false
}

func TestController_Sources_RecordTheirTrigger(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{Cache: CacheOptions{Resync: 2 * time.Second}})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var log reconcileLog
	c := NewController(mgr, "triggers", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	c.OnDelete(func(ctx context.Context, cm *corev1.ConfigMap) { log.record(ctx, Key{cm.Namespace, cm.Name})() })
	// A Pod whose controller is a ConfigMap enqueues it; a Secret maps to the
	// ConfigMap of the same name; a channel value names a ConfigMap.
	Owns[corev1.Pod](c)
	Watches(c, func(s *corev1.Secret) []Key { return []Key{{s.Namespace, s.Name}} })
	ticks := make(chan string, 1)
	FromChannel(c, ticks, func(s string) bool { return s != "ignored" }, func(s string) []Key { return []Key{{ns, s}} })
	ctx := t.Context()
	// A key enqueued before the controller runs is kept, not dropped.
	early := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"}}
	if err := cms.Uncached().Create(ctx, early); err != nil {
		t.Fatal(err)
	}
	c.Enqueue(Key{ns, "early"})
	startManager(t, mgr)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Data: map[string]string{"k": "1"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Created before or after the controller's first run: either cause is right.
	eventually(t, "created", func() bool { return log.saw(ns+"/a", "created") || log.saw(ns+"/a", "initial") })
	cm.Labels = map[string]string{"x": "y"}
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "updated", func() bool { return log.saw(ns+"/a", "updated") })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
	if err := NewClient[corev1.Secret](mgr.conn).Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "mapped", func() bool { return log.saw(ns+"/a", "mapped") })
	ticks <- "ignored"
	ticks <- "a"
	eventually(t, "channel", func() bool { return log.saw(ns+"/a", "channel") })
	c.Enqueue(Key{ns, "a"})
	eventually(t, "manual", func() bool { return log.saw(ns+"/a", "manual") })
	eventually(t, "early manual", func() bool { return log.saw(ns+"/early", "manual") })
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}
	if err := SetControllerReference(cm, pod); err != nil {
		t.Fatal(err)
	}
	if err := NewClient[corev1.Pod](mgr.conn).Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "owned", func() bool { return log.saw(ns+"/a", "owned") })
	eventually(t, "resync", func() bool { return log.saw(ns+"/a", "resync") })
	if err := cms.Delete(ctx, ns, "early"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted (OnDelete)", func() bool { return log.saw(ns+"/early", "deleted") })

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, tr := range log.triggers[ns+"/a"] {
		if tr.Cause == "owned" && !strings.HasPrefix(tr.Detail, "Pod "+ns+"/child") {
			t.Errorf("owned trigger detail = %q, want the Pod", tr.Detail)
		}
		if tr.Cause == "updated" && tr.Detail != "labels" {
			t.Errorf("updated trigger detail = %q, want %q", tr.Detail, "labels")
		}
		if tr.Attempt != 1 {
			t.Errorf("trigger %+v: Attempt = %d, want 1", tr, tr.Attempt)
		}
	}
}

func TestController_Predicates_DropFilteredEvents(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var log reconcileLog
	onlyLabelled := func(e ObjectEvent) bool { return e.Object.GetLabels()["watch"] == "yes" }
	c := NewController(mgr, "predicates", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		return Result{}, nil
	})
	c.WithEventFilter(onlyLabelled).WithPredicates(LabelsChanged)
	startManager(t, mgr)

	ctx := t.Context()
	for _, name := range []string{"ignored", "watched"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if name == "watched" {
			cm.Labels = map[string]string{"watch": "yes"}
		}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "watched reconciled", func() bool { return len(log.causes(ns+"/watched")) == 1 })
	// A data-only change fails LabelsChanged; a label change passes.
	cm, _ := cms.Uncached().Get(ctx, ns, "watched")
	cm.Data = map[string]string{"k": "v"}
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels["more"] = "x"
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "label update reconciled", func() bool { return log.saw(ns+"/watched", "updated") })
	if got := log.causes(ns + "/watched"); len(got) != 2 {
		t.Errorf("reconciles of watched = %v, want [created updated]: the data-only update passed LabelsChanged", got)
	}
	if got := log.causes(ns + "/ignored"); len(got) != 0 {
		t.Errorf("reconciles of ignored = %v, want none", got)
	}
}

func TestController_FourWorkers_NeverReconcileOneKeyTwiceAtOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var perKey sync.Map // key -> *atomic.Int32
	var total, overlap, maxParallel, running atomic.Int32
	c := NewController(mgr, "workers", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		v, _ := perKey.LoadOrStore(cm.Name, new(atomic.Int32))
		if v.(*atomic.Int32).Add(1) > 1 {
			overlap.Add(1)
		}
		n := running.Add(1)
		for m := maxParallel.Load(); n > m && !maxParallel.CompareAndSwap(m, n); m = maxParallel.Load() {
		}
		time.Sleep(20 * time.Millisecond) // stand-in for work, so reconciles overlap
		running.Add(-1)
		v.(*atomic.Int32).Add(-1)
		total.Add(1)
		return Result{}, nil
	})
	c.MaxConcurrentReconciles(4)
	startManager(t, mgr)

	ctx := t.Context()
	for i := range 8 {
		if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Hammer the same keys with updates while they are being reconciled.
	for round := range 5 {
		for i := range 8 {
			patch := fmt.Sprintf(`{"data":{"round":"%d"}}`, round)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}}
			if err := cms.Patch(ctx, cm, MergePatch, []byte(patch), PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, "at least 16 reconciles", func() bool { return total.Load() >= 16 })
	if overlap.Load() != 0 {
		t.Errorf("a key was reconciled by two workers at once %d times", overlap.Load())
	}
	if maxParallel.Load() < 2 {
		t.Errorf("at most %d reconciles ran at once with 4 workers, want several", maxParallel.Load())
	}
}

func TestController_PanicErrorRequeue_FollowTheContract(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var log reconcileLog
	var calls sync.Map // name -> *atomic.Int32
	c := NewController(mgr, "contract", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		defer log.record(ctx, Key{cm.Namespace, cm.Name})()
		v, _ := calls.LoadOrStore(cm.Name, new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		switch cm.Name {
		case "panics":
			if n == 1 {
				panic("boom")
			}
		case "fails":
			if n <= 3 {
				return Result{}, errors.New("not yet")
			}
		case "terminal":
			return Result{}, Terminal(errors.New("bad spec"))
		case "requeues":
			if n <= 2 {
				return Result{RequeueAfter: 50 * time.Millisecond}, nil
			}
		}
		return Result{}, nil
	})
	c.WithPredicates(GenerationChanged)
	startManager(t, mgr)

	ctx := t.Context()
	for _, name := range []string{"panics", "fails", "terminal", "requeues"} {
		if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(name string) int32 {
		v, ok := calls.Load(name)
		if !ok {
			return 0
		}
		return v.(*atomic.Int32).Load()
	}
	// An object created just before the controller starts may be reconciled
	// once more (its replay and its event can both queue it), so counts are
	// lower bounds and triggers are checked as subsequences.
	eventually(t, "panic retried", func() bool { return count("panics") >= 2 })
	eventually(t, "error retried until success", func() bool { return count("fails") >= 4 })
	eventually(t, "requeued twice", func() bool { return count("requeues") >= 3 })
	eventually(t, "terminal ran", func() bool { return count("terminal") >= 1 })

	if got := log.causes(ns + "/fails"); !hasSubsequence(got, "retry", "retry", "retry") {
		t.Errorf("triggers of fails = %v, want three retries", got)
	}
	log.mu.Lock()
	attempts := []int{}
	for _, tr := range log.triggers[ns+"/fails"] {
		attempts = append(attempts, tr.Attempt)
	}
	log.mu.Unlock()
	if !slices.Contains(attempts, 4) {
		t.Errorf("attempts of fails = %v, want one with Attempt 4 (after three failures)", attempts)
	}
	if got := log.causes(ns + "/requeues"); !hasSubsequence(got, "requeue-after", "requeue-after") {
		t.Errorf("triggers of requeues = %v, want two requeue-after", got)
	}
	// A retry of the terminal key would have come 5 ms after it failed; the
	// polls above waited through several longer backoffs.
	if got := log.causes(ns + "/terminal"); slices.Contains(got, "retry") {
		t.Errorf("a Terminal error was retried: triggers %v", got)
	}
	if n := count("terminal"); n > 2 {
		t.Errorf("a Terminal error was retried: %d reconciles", n)
	}
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

// counter is a CRD with a status subresource, for read-your-writes.
type counter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            struct {
		Runs int `json:"runs"`
	} `json:"status,omitempty"`
}

var counters = Declare[counter](Resource{Group: "kctl.test", Version: "v1", Kind: "Counter", Plural: "counters", Namespaced: true})

func installCounterCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
	  "metadata":{"name":"counters.kctl.test"},
	  "spec":{"group":"kctl.test","scope":"Namespaced","names":{"plural":"counters","singular":"counter","kind":"Counter"},
	    "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
	      "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
	if code != 201 && code != 409 {
		t.Fatalf("installing the Counter CRD: %d %s", code, body)
	}
	c := NewClient[counter](mustConn(t, cfg))
	eventually(t, "Counter CRD served", func() bool {
		_, err := c.List(t.Context(), ListOptions{Namespace: "default"})
		return err == nil
	})
}

func mustConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestController_ReadYourWrites_NeverSeesAStaleCounter(t *testing.T) {
	cfg := testConfig(t)
	installCounterCRD(t, cfg)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	client := ClientFor[counter](mgr)
	var runs, stale atomic.Int32
	var last sync.Map // name -> int written last
	NewController(mgr, "counter", func(ctx context.Context, c *counter) (Result, error) {
		if want, ok := last.Load(c.Name); ok && c.Status.Runs != want.(int) {
			stale.Add(1)
			t.Errorf("reconcile saw status.runs=%d, but the last write set %d", c.Status.Runs, want)
		}
		if c.Status.Runs >= 20 {
			return Result{}, nil
		}
		c.Status.Runs++
		if err := client.UpdateStatus(ctx, c); err != nil {
			return Result{}, err
		}
		last.Store(c.Name, c.Status.Runs)
		runs.Add(1)
		// Requeue at once: without read-your-writes this reconcile would
		// often start from the cache's copy before the write.
		return Result{RequeueAfter: time.Nanosecond}, nil
	})
	startManager(t, mgr)
	for i := range 3 {
		if err := client.Create(t.Context(), &counter{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("c", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "60 counted runs", func() bool { return runs.Load() == 60 })
	if stale.Load() != 0 {
		t.Errorf("%d reconciles started from a cache older than their own last write", stale.Load())
	}
}

func TestController_Finalizer_DeleteWaitsForCleanup(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	const fin = "kctl.test/cleanup"
	allow := make(chan struct{})
	var cleanups atomic.Int32
	var deletedSeen atomic.Bool
	c := NewController(mgr, "finalizer", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		return Result{}, nil
	})
	c.Finalizer(fin, func(ctx context.Context, cm *corev1.ConfigMap) error {
		cleanups.Add(1)
		select {
		case <-allow:
			return nil
		default:
			return errors.New("cleanup not allowed yet")
		}
	})
	c.OnDelete(func(ctx context.Context, cm *corev1.ConfigMap) { deletedSeen.Store(true) })
	startManager(t, mgr)

	ctx := t.Context()
	if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "finalizer added", func() bool {
		cm, err := cms.Uncached().Get(ctx, ns, "f")
		return err == nil && len(cm.Finalizers) == 1 && cm.Finalizers[0] == fin
	})
	if err := cms.Delete(ctx, ns, "f"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cleanup attempted twice", func() bool { return cleanups.Load() >= 2 })
	if _, err := cms.Uncached().Get(ctx, ns, "f"); err != nil {
		t.Fatalf("the object went away before cleanup succeeded: %v", err)
	}
	close(allow)
	eventually(t, "object gone after cleanup", func() bool {
		_, err := cms.Uncached().Get(ctx, ns, "f")
		return apierrors.IsNotFound(err)
	})
	eventually(t, "OnDelete called", deletedSeen.Load)
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
		"(*metrics).page",
		"(*health).handler",
		"(*elector).run",
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

// hasSubsequence reports whether want appears in order (not necessarily adjacent) in got.
func hasSubsequence(got []string, want ...string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
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

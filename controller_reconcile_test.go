package kctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

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

// hasSubsequence reports whether want appears in order (not necessarily adjacent) in got.
func hasSubsequence(got []string, want ...string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// The reconcile chain runs its steps by rank, whatever the order of the
// builder calls that add them; a step added again replaces the first; and
// a panic inside the read step is an error the steps outside it see.
func TestController_ReconcileChain_RunsStepsByRankWhateverTheCallOrder(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "chain", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	c.observer = m.observer("chain", 1)
	var ran []string
	step := func(name string, rank int, panics bool) middleware[*corev1.ConfigMap] {
		wrap := func(next reconcileFunc[*corev1.ConfigMap]) reconcileFunc[*corev1.ConfigMap] {
			return func(ctx context.Context, k Key, obj *corev1.ConfigMap) (Result, error) {
				ran = append(ran, name)
				if panics {
					panic("inner step")
				}
				res, err := next(ctx, k, obj)
				if err != nil {
					ran = append(ran, name+" saw: "+strings.SplitN(err.Error(), ":", 2)[0])
				}
				return res, err
			}
		}
		return middleware[*corev1.ConfigMap]{name: name, rank: rank, wrap: wrap}
	}
	c.use(step("inner", rankObject, true))
	c.use(step("report", rankReport, false))
	c.use(step("bound", rankBound, false))
	c.use(step("inner", rankObject, false)) // replaces the panicking one
	c.use(step("panics", rankObject, true))
	_, err := c.chained()(t.Context(), Key{Namespace: "ns", Name: "a"}, nil)
	if err == nil || !strings.Contains(err.Error(), "panicked: inner step") {
		t.Fatalf("the chain returned %v, want the panic as an error", err)
	}
	// Of one rank, the step added last wraps the others: inner never runs.
	want := []string{"report", "bound", "panics", "bound saw: kctl", "report saw: kctl"}
	if !slices.Equal(ran, want) {
		t.Errorf("the steps ran as %q, want %q", ran, want)
	}
}

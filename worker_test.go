package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/causes"
	"github.com/kctl-dev/kctl/internal/controlplane"
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

// Issue 33, item 10: a controller waits for its caches once, whichever
// of its two runnables (the leader's, every replica's) runs it, and says
// so once. A source whose CRD is not installed keeps it waiting, so both
// runnables are still waiting when the Manager stops: each used to log
// the wait.
func TestController_WaitsForItsCaches_LogsItOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	mgr := testManager(t, cfg, ns, Options{Logger: logger})
	c := NewController(mgr, "waits", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		return Result{}, nil
	})
	Watches(c, func(*notInstalledGizmo) []Key { return nil })
	stop := startManager(t, mgr)
	const waiting = "controller waiting for its caches to sync"
	logs.linesEventually(t, waiting, 1)
	if err := stop(); err != nil {
		t.Fatalf("Manager.Start returned %v", err)
	}
	// Both runnables have returned: what they logged is all there.
	if lines := logs.lines(waiting); len(lines) != 1 {
		t.Errorf("the wait for the caches is logged %d times, want once:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if lines := logs.lines("controller started"); len(lines) != 0 {
		t.Errorf("the controller started without its caches:\n%s", lines)
	}
}

// Issue 15 item 12: deleted objects are freed.

// deleteReplica is one replica of a ConfigMap controller with an OnDelete hook.
type deleteReplica struct {
	m       *Manager
	c       *Controller[corev1.ConfigMap]
	inf     *Informer[corev1.ConfigMap]
	deletes atomic.Int64
	stop    func() error
}

func startDeleteReplica(t *testing.T, cfg *rest.Config, ns, id string) *deleteReplica {
	t.Helper()
	r := &deleteReplica{m: testManager(t, cfg, ns, Options{ShutdownTimeout: 5 * time.Second})}
	le := apiLeaderElection(ns, id)
	le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = 20*time.Second, 15*time.Second, time.Second // no loss on a busy machine
	if err := r.m.ElectLeader(le); err != nil {
		t.Fatal(err)
	}
	r.c = NewController(r.m, "freed", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	r.c.OnDelete(func(context.Context, *corev1.ConfigMap) { r.deletes.Add(1) })
	var err error
	if r.inf, err = InformerFor[corev1.ConfigMap](r.m.Cache()); err != nil {
		t.Fatal(err)
	}
	r.stop = startManager(t, r.m)
	return r
}

// running reports whether the replica's controller runs (it leads).
func (r *deleteReplica) running() bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.queue != nil
}

// heldDeletes is the number of deleted objects the controller keeps for
// OnDelete: in the triggers of its queued keys.
func (r *deleteReplica) heldDeletes() int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return goneIn(&r.c.ledger)
}

// goneIn counts the triggers that hold a deleted object.
func goneIn(ledger *causes.Ledger[Key, Trigger]) int {
	n := 0
	for _, t := range ledger.All() {
		if t.gone != nil {
			n++
		}
	}
	return n
}

const mib = 1 << 20

// churnConfigMaps creates n ConfigMaps of size bytes each in ns, then deletes them.
func churnConfigMaps(t *testing.T, cfg *rest.Config, ns string, n, size int) {
	t.Helper()
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	each := func(do func(i int) error) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		work := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range work {
					if err := do(i); err != nil {
						errs <- err
					}
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	each(func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("big-", i)},
			Data: map[string]string{"data": strings.Repeat(fmt.Sprintf("%07d,", i), size/8)}}
		return cms.Create(t.Context(), cm)
	})
	each(func(i int) error { return cms.Delete(t.Context(), ns, fmt.Sprint("big-", i)) })
}

// Creating and deleting 400 ConfigMaps of 128 KiB (50 MiB) leaves the live
// heap of a leader and a standby, together in this process, within 10 MiB
// of where it was, and again after the standby takes over; the standby
// holds no deleted object for OnDelete and runs it for none of the deletes
// that happened before it led (OnDelete's documented promise).
func TestController_DeletedObjects_AreFreedOnLeaderAndStandby(t *testing.T) {
	cfg := testConfig(t)
	if !controlplane.InOwnProcess(t) {
		return // heap bounds: measured where no other test's memory is live
	}
	ns := testNamespace(t, cfg)
	leader := startDeleteReplica(t, cfg, ns, "leader")
	pollWithin(t, 30*time.Second, "the first replica leads", leader.running)
	standby := startDeleteReplica(t, cfg, ns, "standby")
	pollWithin(t, 30*time.Second, "the standby's cache syncs", standby.inf.HasSynced)
	if standby.running() {
		t.Fatal("the standby runs its controller while the first replica leads")
	}
	const n, size = 400, 128 << 10
	before := liveHeap()
	churnConfigMaps(t, cfg, ns, n, size)
	pollWithin(t, 60*time.Second, "OnDelete for every ConfigMap on the leader", func() bool { return leader.deletes.Load() == n })
	for _, r := range []*deleteReplica{leader, standby} {
		pollWithin(t, 30*time.Second, "the caches to empty", func() bool { return len(mustList(t, r.inf, ListOptions{})) == 0 })
	}
	pollWithin(t, 30*time.Second, "the leader to consume its deletes", func() bool { return leader.heldDeletes() == 0 })
	after := liveHeap()
	t.Logf("live heap: %.1f MiB before, %.1f MiB after %d creates and deletes of %d KiB (leader and standby)",
		float64(before)/mib, float64(after)/mib, n, size>>10)
	if after > before+10*mib {
		t.Errorf("live heap grew by %.1f MiB after the churn, want < 10 MiB: deleted objects are held", float64(after-before)/mib)
	}
	if held := standby.heldDeletes(); held != 0 {
		t.Errorf("the standby holds %d deleted objects for OnDelete, want none: it does not lead", held)
	}

	if err := leader.stop(); err != nil {
		t.Fatal(err)
	}
	pollWithin(t, 30*time.Second, "the standby takes over", standby.running)
	pollWithin(t, 30*time.Second, "the new leader's queue to drain", func() bool {
		standby.c.mu.Lock()
		defer standby.c.mu.Unlock()
		return standby.c.queue != nil && standby.c.queue.Len() == 0
	})
	took := liveHeap()
	t.Logf("live heap: %.1f MiB after the standby took over", float64(took)/mib)
	if took > before+10*mib {
		t.Errorf("live heap is %.1f MiB above the start after the standby took over, want < 10 MiB", float64(took-before)/mib)
	}
	if d := standby.deletes.Load(); d != 0 {
		t.Errorf("the new leader ran OnDelete %d times for deletes made before it led, want 0 (see OnDelete)", d)
	}
}

// A controller that does not run (a standby) keeps no deleted object for
// OnDelete; one that runs keeps it until the key's reconcile takes it.
func TestController_DeleteWhileNotRunning_KeepsNothing(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "deletes", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	var onDelete []string
	c.OnDelete(func(_ context.Context, cm *corev1.ConfigMap) { onDelete = append(onDelete, cm.Name) })
	c.onEvent(event[*corev1.ConfigMap]{Type: Deleted, Object: storeCM("ns", "standby", "1", nil)})
	if n := goneIn(&c.ledger); n != 0 {
		t.Errorf("a controller that does not run keeps %d deleted objects, want 0", n)
	}
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q // as run does, without starting the controller
	c.onEvent(event[*corev1.ConfigMap]{Type: Deleted, Object: storeCM("ns", "leading", "1", nil)})
	if n := goneIn(&c.ledger); n != 1 {
		t.Fatalf("a running controller keeps %d deleted objects, want 1", n)
	}
	c.observer = m.observer("deletes", 1)
	if !c.processNext(t.Context(), q, c.chained()) {
		t.Fatal("processNext: the queue shut down")
	}
	if n := goneIn(&c.ledger); n != 0 || len(onDelete) != 1 || onDelete[0] != "leading" {
		t.Errorf("after the reconcile: %d deleted objects kept, OnDelete ran for %q; want 0 kept and OnDelete for leading", n, onDelete)
	}
}

// While a controller runs, the first cause since a key's last reconcile
// wins and later ones merge into it (Merged), the last state before a
// delete kept for OnDelete; a key queued while it is reconciled closes
// QueuedAgain's channel and is queued with that cause; a retry's cause
// gives way to an event that queued the key first.
func TestController_Triggers_FirstCauseWinsLaterOnesMerge(t *testing.T) {
	m := offlineManager(t)
	c := NewController(m, "triggers", func(context.Context, *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	var seen []Trigger
	var last []string
	c.OnDelete(func(ctx context.Context, cm *corev1.ConfigMap) {
		tr, _ := TriggerFrom(ctx)
		seen = append(seen, tr)
		last = append(last, cm.ResourceVersion)
		if len(seen) == 1 {
			c.Enqueue(Key{Namespace: "ns", Name: "a"}) // queued again while it runs
			select {
			case <-QueuedAgain(ctx):
			default:
				t.Error("QueuedAgain is open after the key was queued again")
			}
		}
	})
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q // as run does, without starting the controller
	c.observer = m.observer("triggers", 1)
	old := storeCM("ns", "a", "1", nil)
	c.onEvent(event[*corev1.ConfigMap]{Type: Updated, Object: storeCM("ns", "a", "2", map[string]string{"l": "1"}), Old: old})
	c.onEvent(event[*corev1.ConfigMap]{Type: Deleted, Object: storeCM("ns", "a", "3", nil)})
	c.onEvent(event[*corev1.ConfigMap]{Type: Deleted, Object: storeCM("ns", "a", "4", nil)})
	if !c.processNext(t.Context(), q, c.chained()) {
		t.Fatal("processNext: the queue shut down")
	}
	if len(seen) != 1 || seen[0].Cause != "updated" || seen[0].Detail != "labels" || seen[0].Merged != 2 || last[0] != "4" {
		t.Fatalf("OnDelete saw %+v with versions %v; want updated (labels), 2 merged, the last state 4", seen, last)
	}
	k := Key{Namespace: "ns", Name: "a"}
	c.mu.Lock()
	again := c.ledger.Queued(k)
	c.mu.Unlock()
	if again == nil || again.Cause != "manual" || q.Len() != 1 {
		t.Fatalf("after the reconcile: queued %d, by %+v; want the key queued by the Enqueue during it", q.Len(), again)
	}
	if !c.processNext(t.Context(), q, c.chained()) { // manual: nothing cached, no OnDelete
		t.Fatal("processNext: the queue shut down")
	}
	c.requeue(k, Trigger{Cause: "retry"}, func() { q.AddAfter(k, time.Hour) })
	c.onEvent(event[*corev1.ConfigMap]{Type: Deleted, Object: storeCM("ns", "a", "5", nil)})
	if !c.processNext(t.Context(), q, c.chained()) {
		t.Fatal("processNext: the queue shut down")
	}
	if len(seen) != 2 || seen[1].Cause != "deleted" || seen[1].Merged != 0 {
		t.Errorf("after a retry and a delete, OnDelete saw %+v; want deleted, the event that queued it first", seen[1:])
	}
}

// A controller's worker loop without a server, per key: an update of T
// queued (onEvent), taken by processNext, its object read from the cache
// (after read-your-writes) and copied, reconciled, and forgotten. 1,000
// cached ConfigMaps, one worker, no history: what each reconcile costs
// the framework.
func BenchmarkController_ProcessNext(b *testing.B) {
	m := offlineManager(b)
	reconciled := 0
	c := NewController(m, "bench", func(_ context.Context, cm *corev1.ConfigMap) (Result, error) {
		reconciled++
		return Result{}, nil
	})
	cms := benchCMs(1000, "1")
	for _, cm := range cms {
		c.informer.store.put(cm)
	}
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q // as run does, without starting the controller
	c.observer = m.observer("bench", 1)
	reconcile := c.chained()
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		cm := cms[n%len(cms)]
		n++
		c.onEvent(event[*corev1.ConfigMap]{Type: Updated, Object: cm, Old: cm})
		if !c.processNext(ctx, q, reconcile) {
			b.Fatal("processNext: the queue shut down")
		}
	}
	if reconciled != n {
		b.Fatalf("reconciled %d times for %d events, want one each", reconciled, n)
	}
}

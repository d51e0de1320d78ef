package kctl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

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
	return goneIn(r.c.triggers)
}

// goneIn counts the triggers that hold a deleted object.
func goneIn(triggers map[Key]*Trigger) int {
	n := 0
	for _, t := range triggers {
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
	if n := goneIn(c.triggers); n != 0 {
		t.Errorf("a controller that does not run keeps %d deleted objects, want 0", n)
	}
	q := NewQueue(QueueOptions[Key]{})
	c.queue = q // as run does, without starting the controller
	c.onEvent(event[*corev1.ConfigMap]{Type: Deleted, Object: storeCM("ns", "leading", "1", nil)})
	if n := goneIn(c.triggers); n != 1 {
		t.Fatalf("a running controller keeps %d deleted objects, want 1", n)
	}
	c.observer = m.observer("deletes", 1)
	if !c.processNext(t.Context(), q, c.chained()) {
		t.Fatal("processNext: the queue shut down")
	}
	if n := goneIn(c.triggers); n != 0 || len(onDelete) != 1 || onDelete[0] != "leading" {
		t.Errorf("after the reconcile: %d deleted objects kept, OnDelete ran for %q; want 0 kept and OnDelete for leading", n, onDelete)
	}
}

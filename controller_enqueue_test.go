package kctl

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// WithQueueOptions reaches the controller's queue: with MinInterval, the
// reconciles of one key are at least that far apart, however often it is
// enqueued.
func TestController_WithQueueOptions_MinIntervalSpacesAKeysReconciles(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	const interval = 400 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	c := NewController(mgr, "paced", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		return Result{}, nil
	})
	c.WithQueueOptions(QueueOptions[Key]{MinInterval: interval})
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	runs := func() int { mu.Lock(); defer mu.Unlock(); return len(at) }
	eventually(t, "the first reconcile", func() bool { return runs() >= 1 })
	for range 3 {
		before := runs()
		c.Enqueue(Key{ns, "a"})
		eventually(t, "the next reconcile", func() bool { return runs() > before })
	}
	mu.Lock()
	defer mu.Unlock()
	// MinInterval spaces the queue's Gets of a key; each reconcile reads
	// the clock a little after its Get, so the gaps seen here may be
	// that scheduling delay short (20 µs seen under -race and load).
	const jitter = 10 * time.Millisecond
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < interval-jitter {
			t.Errorf("reconciles %d and %d of one key were %v apart, want at least MinInterval %v (less %v of scheduling delay)", i, i+1, gap, interval, jitter)
		}
	}
}

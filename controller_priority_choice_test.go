package kctl

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

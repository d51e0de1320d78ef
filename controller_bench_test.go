package kctl

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

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

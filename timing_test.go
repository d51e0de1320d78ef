package kctl_test

// kctl's own timing, checked exactly on fake time: the whole Manager runs in
// a testing/synctest bubble over kctltest's in-memory API server, so a
// bound is the configured duration itself, never a margin for a busy
// machine.

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WithQueueOptions' MinInterval spaces a key's reconciles: a key queued
// again at once after its reconcile waits until MinInterval has passed
// since that reconcile began, to the nanosecond of fake time.
func TestController_WithQueueOptions_MinIntervalSpacesAKeysReconciles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := kctltest.StartInMemory(t)
		ns := env.Namespace(t)
		const interval = 400 * time.Millisecond
		var mu sync.Mutex
		var at []time.Time
		var c *kctl.Controller[corev1.ConfigMap]
		env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, func(mgr *kctl.Manager) {
			c = kctl.NewController(mgr, "paced", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				at = append(at, time.Now())
				return kctl.Result{}, nil
			})
			c.WithQueueOptions(kctl.QueueOptions[kctl.Key]{MinInterval: interval})
		})
		cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		runs := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(at)
		}
		synctest.Wait()
		for runs() < 1 {
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		for range 3 {
			before := runs()
			c.Enqueue(kctl.Key{Namespace: ns, Name: "a"})
			for runs() == before {
				time.Sleep(time.Millisecond)
				synctest.Wait()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < interval || gap > interval+time.Millisecond {
				t.Errorf("reconciles %d and %d of one key were %v apart, want MinInterval %v (to the millisecond the test steps by)", i, i+1, gap, interval)
			}
		}
	})
}

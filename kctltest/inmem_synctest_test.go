package kctltest_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// reconciles counts a controller's reconciles by key, and when each ran.
type reconciles struct {
	mu    sync.Mutex
	times map[string][]time.Duration // since the bubble's start
}

func (r *reconciles) add(key string, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.times[key] = append(r.times[key], at)
}

func (r *reconciles) of(key string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.times[key]...)
}

// In a synctest bubble the whole Manager runs on fake time: a controller
// that requeues every 10 minutes, behind leader election, reconciles at
// 0, 10, 20 and 30 minutes of a 35-minute sleep, which takes no time.
func TestInMemory_Synctest_ManagerRunsOnFakeTime(t *testing.T) {
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		env := kctltest.StartInMemory(t)
		ns := env.Namespace(t)
		got := &reconciles{times: map[string][]time.Duration{}}
		env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, func(mgr *kctl.Manager) {
			if err := mgr.ElectLeader(kctl.LeaderElection{Name: "ticker", Namespace: ns}); err != nil {
				t.Fatal(err)
			}
			kctl.NewController(mgr, "ticker", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
				got.add(cm.Name, time.Since(start).Round(time.Second))
				return kctl.Result{RequeueAfter: 10 * time.Minute}, nil
			})
		})
		cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(35 * time.Minute)
		synctest.Wait()
		times := got.of("a")
		if len(times) != 4 || times[1]-times[0] != 10*time.Minute || times[3]-times[0] != 30*time.Minute {
			t.Errorf("reconciles of a at %v, want 4, 10 minutes apart", times)
		}
	})
	if took := time.Since(wall); took > 20*time.Second {
		t.Errorf("35 minutes of fake time took %v of wall time", took)
	}
}

// A controller's error handling is tested by making the server fail: a
// 429 (retried by kctl's client after its Retry-After), then Conflicts
// (retried by the controller with backoff), then success.
func TestInMemory_InjectError_ControllerRetriesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := kctltest.StartInMemory(t)
		ns := env.Namespace(t)
		var mu sync.Mutex
		fails := map[string]int{}
		env.InjectError(t, "update", "configmaps", func(namespace, name string) error {
			mu.Lock()
			defer mu.Unlock()
			fails[name]++
			switch fails[name] {
			case 1:
				return apierrors.NewTooManyRequests("injected", 1)
			case 2, 3:
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, context.Canceled)
			}
			return nil
		})
		env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, func(mgr *kctl.Manager) {
			cms := kctl.ClientFor[corev1.ConfigMap](mgr)
			kctl.NewController(mgr, "marker", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
				if cm.Data["seen"] == "yes" {
					return kctl.Result{}, nil
				}
				cm.Data = map[string]string{"seen": "yes"}
				return kctl.Result{}, cms.Update(ctx, cm)
			})
		})
		cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		cm, err := cms.Get(t.Context(), ns, "a")
		mu.Lock()
		n := fails["a"]
		mu.Unlock()
		if err != nil || cm.Data["seen"] != "yes" || n != 4 {
			t.Errorf("after a 429 and two Conflicts: %v, %v, after %d updates; want seen=yes after 4", cm, err, n)
		}
	})
}

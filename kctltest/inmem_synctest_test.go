package kctltest_test

import (
	"context"
	"fmt"
	"slices"
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

// A controller's Events reach the in-memory server, and a second Manager
// electing the same leader waits while the first holds the Lease: in a
// bubble, a Lease's 15 s duration passes in no time.
func TestInMemory_EventsAndLeaderElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := kctltest.StartInMemory(t)
		ns := env.Namespace(t)
		opts := kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
		var mu sync.Mutex
		by := map[string]int{}
		setup := func(name string) func(*kctl.Manager) error {
			return func(mgr *kctl.Manager) error {
				if err := mgr.ElectLeader(kctl.LeaderElection{Name: "events", Namespace: ns, Identity: name}); err != nil {
					return err
				}
				rec := mgr.EventRecorder("events")
				kctl.NewController(mgr, "events", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
					mu.Lock()
					by[name]++
					mu.Unlock()
					rec.Event(cm, corev1.EventTypeNormal, "Seen", "seen by "+name)
					return kctl.Result{}, nil
				})
				return nil
			}
		}
		first := env.StartManager(t, opts, setup("first"))
		synctest.Wait()
		env.StartManager(t, opts, setup("second"))
		cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		seen := fmt.Sprint(by)
		mu.Unlock()
		if seen != "map[first:1]" {
			t.Errorf("reconciles by Manager while the first leads: %s, want map[first:1]", seen)
		}
		first.Stop(t)
		if err := cms.Delete(t.Context(), ns, "a"); err != nil {
			t.Fatal(err)
		}
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		seen = fmt.Sprint(by)
		mu.Unlock()
		if seen != "map[first:1 second:1]" {
			t.Errorf("reconciles by Manager after the first stopped: %s, want map[first:1 second:1]", seen)
		}
		events, err := kctl.NewClient[corev1.Event](env.Conn).List(t.Context(), kctl.ListOptions{Namespace: ns})
		var notes []string
		for _, e := range events {
			notes = append(notes, e.InvolvedObject.Name+": "+e.Message)
		}
		slices.Sort(notes)
		if err != nil || fmt.Sprint(notes) != "[a: seen by first b: seen by second]" {
			t.Errorf("Events: %v, %v; want one about a by first, one about b by second", notes, err)
		}
	})
}

// Eventually with an in-memory Env checks again as soon as its server
// changes, not at its next poll (every 50 ms by then): a ConfigMap made
// 200 ms into a wait is seen at 200 ms of the bubble's clock, not at 213.
func TestInMemory_Eventually_ChecksWhenTheServerChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := kctltest.StartInMemory(t)
		ns := env.Namespace(t)
		cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
		go func() {
			time.Sleep(200 * time.Millisecond)
			if err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}); err != nil {
				t.Error(err)
			}
		}()
		start := time.Now()
		kctltest.Eventually(t, "the ConfigMap late", func() string {
			if _, err := cms.Get(t.Context(), ns, "late"); err != nil {
				return err.Error()
			}
			return ""
		})
		if took := time.Since(start); took != 200*time.Millisecond {
			t.Errorf("Eventually returned %v after the wait began, want 200ms: when the ConfigMap was made", took)
		}
	})
}

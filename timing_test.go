package kctl_test

// kctl's own timing, checked exactly on fake time: the whole Manager runs in
// a testing/synctest bubble over kctltest's in-memory API server, so a
// bound is the configured duration itself, never a margin for a busy
// machine.

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// lockedBuffer collects a Manager's log lines from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const shutdownTimeout = 3 * time.Second

// startForShutdown starts, over the in-memory server, a Manager scoped to
// a new namespace, with ShutdownTimeout 3 s and its log in logs, after
// setup; stop cancels its context and returns what Start returned and how
// long after the cancel it did.
func startForShutdown(t *testing.T, setup func(mgr *kctl.Manager, ns string)) (env *kctltest.Env, ns string, logs *lockedBuffer, stop func() (error, time.Duration)) {
	env = kctltest.StartInMemory(t)
	ns = env.Namespace(t)
	logs = &lockedBuffer{}
	mgr, err := kctl.NewManager(kctl.Options{
		Config:          env.Config(),
		ShutdownTimeout: shutdownTimeout,
		Logger:          slog.New(slog.NewTextHandler(logs, nil)),
		Cache:           kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	setup(mgr, ns)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Manager's log:\n%s", logs.String())
		}
	})
	stop = func() (error, time.Duration) {
		begin := time.Now()
		cancel()
		err := <-done
		return err, time.Since(begin)
	}
	return env, ns, logs, stop
}

// Start returns at ShutdownTimeout, not later, when a reconcile and a
// runnable ignore their contexts: it abandons them and names them in the
// log, having released the Lease and written the Events recorded before
// the shutdown (issue 15 item 8: Start once returned after 18.9 s).
func TestManager_Shutdown_ReturnsWithinTimeoutAbandoningWorkThatIgnoresItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{}) // closed when the test ends: the abandoned work then returns
		defer close(release)
		reconciling := make(chan struct{}, 1)
		var rec *kctl.EventRecorder
		env, ns, logs, stop := startForShutdown(t, func(mgr *kctl.Manager, ns string) {
			err := mgr.ElectLeader(kctl.LeaderElection{Name: "leader-test", Namespace: ns, Identity: "stubborn-0"})
			if err != nil {
				t.Fatal(err)
			}
			kctl.NewController(mgr, "stubborn", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
				reconciling <- struct{}{}
				<-release // ignores ctx
				return kctl.Result{}, nil
			})
			err = mgr.Add(kctl.Runnable{Name: "deaf", Run: func(context.Context) error { <-release; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			rec = mgr.EventRecorder("stubborn")
		})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck"}}
		if err := kctl.NewClient[corev1.ConfigMap](env.Conn).Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		<-reconciling
		rec.Event(cm, corev1.EventTypeNormal, "Stuck", "recorded before shutdown")

		err, took := stop()
		if err != nil {
			t.Errorf("Start returned %v, want nil", err)
		}
		if took > shutdownTimeout {
			t.Errorf("Start returned %v after its context ended, want within ShutdownTimeout (%v)", took, shutdownTimeout)
		}
		lease, err := kctl.NewClient[coordinationv1.Lease](env.Conn).Get(t.Context(), ns, "leader-test")
		if err != nil {
			t.Fatal(err)
		}
		if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("the lease is held by %q after Start returned, want released", *h)
		}
		for _, want := range []string{"abandoning leader work", "controller stubborn (reconciling " + ns + "/stuck", "Start returns while these still run", "deaf"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the log does not name %q", want)
			}
		}
		events, err := kctl.NewClient[corev1.Event](env.Conn).List(t.Context(), kctl.ListOptions{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || events[0].Reason != "Stuck" {
			t.Errorf("Events after Start returned: %d, want the one recorded before the shutdown", len(events))
		}
	})
}

// An in-flight reconcile may finish until ShutdownTimeout less a reserve
// (3 s less a fifth: 2.4 s), and its context is then cancelled, so work
// that honours it ends in time and nothing is abandoned; Start returns
// before ShutdownTimeout.
func TestManager_Shutdown_CancelsInFlightReconcilesAtDrainBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const drainBy = 2400 * time.Millisecond // timeout - min(timeout/5, 2s)
		reconciling := make(chan struct{}, 1)
		cancelled := make(chan time.Time, 1)
		env, ns, logs, stop := startForShutdown(t, func(mgr *kctl.Manager, ns string) {
			kctl.NewController(mgr, "draining", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
				select { // one reconcile is expected; a second must not block
				case reconciling <- struct{}{}:
				default:
				}
				<-ctx.Done() // work that stops when its context ends
				select {
				case cancelled <- time.Now():
				default:
				}
				return kctl.Result{}, nil
			})
		})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}
		if err := kctl.NewClient[corev1.ConfigMap](env.Conn).Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		<-reconciling
		begin := time.Now()
		err, took := stop()
		if err != nil {
			t.Errorf("Start returned %v, want nil", err)
		}
		var at time.Duration
		select {
		case end := <-cancelled:
			at = end.Sub(begin)
		default:
			t.Fatal("Start returned, but the in-flight reconcile's context never ended")
		}
		if at != drainBy {
			t.Errorf("the reconcile's context ended %v after the Manager's, want %v (ShutdownTimeout %v less a fifth)", at, drainBy, shutdownTimeout)
		}
		if took >= shutdownTimeout {
			t.Errorf("Start returned %v after its context ended, want before ShutdownTimeout (%v)", took, shutdownTimeout)
		}
		if !strings.Contains(logs.String(), "shutdown timeout nearly passed: cancelling in-flight reconciles") {
			t.Error("the log does not say that in-flight reconciles are cancelled")
		}
		if strings.Contains(logs.String(), "abandoning") {
			t.Error("the log abandons work, want none: the reconcile honoured its context")
		}
	})
}

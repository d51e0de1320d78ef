package kctl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 3: NeedLeader(false) runs a controller on every replica,
// while the others run only on the leader.
func TestController_NeedLeaderFalse_RunsOnEveryReplica(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}}
	if err := NewClient[corev1.ConfigMap](connFor(t, cfg)).Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	type replica struct{ led, everywhere, channel atomic.Int32 }
	replicas := make([]*replica, 2)
	for i := range replicas {
		r := &replica{}
		replicas[i] = r
		var logs logBuffer
		mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := mgr.ElectLeader(apiLeaderElection(ns, fmt.Sprint("r", i))); err != nil {
			t.Fatal(err)
		}
		NewController(mgr, "led", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
			r.led.Add(1)
			return Result{}, nil
		})
		ch := make(chan string, 1)
		ch <- "tick"
		c := NewController(mgr, "everywhere", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
			if tr, _ := TriggerFrom(ctx); tr.Cause == "channel" {
				r.channel.Add(1)
			}
			r.everywhere.Add(1)
			return Result{}, nil
		})
		c.NeedLeader(false)
		FromChannel(c, ch, nil, func(string) []Key { return []Key{{ns, "work"}} })
		startManager(t, mgr)
	}
	eventually(t, "every replica reconciles, from the cache and the channel", func() bool {
		for _, r := range replicas {
			if r.everywhere.Load() == 0 || r.channel.Load() == 0 {
				return false
			}
		}
		return true
	})
	eventually(t, "the leader reconciles", func() bool {
		return replicas[0].led.Load()+replicas[1].led.Load() > 0
	})
	// The standby's caches have synced (its every-replica controller ran):
	// had it run the leader-only one too, that would have reconciled.
	if replicas[0].led.Load() > 0 && replicas[1].led.Load() > 0 {
		t.Error("both replicas ran the leader-only controller")
	}
}

func TestController_NeedLeaderAfterFromChannel_IsAnErrorFromStart(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	c := NewController(mgr, "late", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	FromChannel(c, make(chan int), nil, func(int) []Key { return nil })
	c.NeedLeader(false)
	err := mgr.Start(t.Context())
	if err == nil || !containsAll(err.Error(), "NeedLeader after FromChannel", "call NeedLeader first") {
		t.Errorf("Start = %v, want the order of NeedLeader and FromChannel named", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

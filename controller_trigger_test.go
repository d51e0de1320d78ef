package kctl

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 12: after a reconcile asks for a requeue (RequeueAfter, or
// an error's retry), the next reconcile that an event causes is reported
// with the event's cause, and its wait counts from the event.
func TestController_EventAfterARequeue_IsTheTrigger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result func() (Result, error)
	}{
		{"requeue-after", func() (Result, error) { return Result{RequeueAfter: time.Hour}, nil }},
		{"retry", func() (Result, error) { return Result{}, errors.New("not yet") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			ns := testNamespace(t, cfg)
			mgr := testManager(t, cfg, ns, Options{})
			cms := ClientFor[corev1.ConfigMap](mgr)
			var log reconcileLog
			var calls atomic.Int32
			c := NewController(mgr, "trigger", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
				defer log.record(ctx, Key{cm.Namespace, cm.Name})()
				if calls.Add(1) == 1 {
					return tc.result()
				}
				return Result{}, nil
			})
			// A retry an hour away: only the event can bring the key back.
			c.WithRateLimiter(NewRateLimiter[Key](time.Hour, time.Hour, 10, 100))
			startManager(t, mgr)

			ctx := t.Context()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
			if err := cms.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the first reconcile", func() bool { return calls.Load() >= 1 })
			patched := time.Now()
			patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
			if err := cms.Patch(ctx, cm, MergePatch, patch, PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the reconcile of the update", func() bool { return calls.Load() >= 2 })
			log.mu.Lock()
			got := slices.Clone(log.triggers[ns+"/a"])
			log.mu.Unlock()
			last := got[len(got)-1]
			if last.Cause != "updated" || last.Detail != "labels" {
				t.Errorf("trigger after the %s = %q %q, want %q %q", tc.name, last.Cause, last.Detail, "updated", "labels")
			}
			if since := time.Since(patched); last.Waited > since {
				t.Errorf("trigger waited %v, more than the %v since the update: counted from the requeue", last.Waited, since)
			}
		})
	}
}

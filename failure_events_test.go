package kctl

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 16: after K consecutive failures, a Warning Event on the
// object names the error.
func TestWarnAfterFailures_RecordsAWarningEventNamingTheError(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	var calls atomic.Int32
	c := NewController(mgr, "warns", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		calls.Add(1)
		if cm.Name == "fine" {
			return Result{}, nil
		}
		return Result{}, errors.New("the quota is exhausted")
	})
	c.WithRateLimiter(NewRateLimiter[Key](time.Millisecond, 10*time.Millisecond, 100, 100))
	c.WarnAfterFailures(mgr.EventRecorder("warns"), 3)
	startManager(t, mgr)
	for _, name := range []string{"broken", "fine"} {
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	events := NewClient[corev1.Event](mustConn(t, cfg))
	var found *corev1.Event
	eventually(t, "a ReconcileFailed Event", func() bool {
		list, err := events.List(t.Context(), ListOptions{Namespace: ns})
		if err != nil {
			return false
		}
		for _, e := range list {
			if e.Reason == "ReconcileFailed" {
				found = e
				return true
			}
		}
		return false
	})
	if found.Type != corev1.EventTypeWarning || found.InvolvedObject.Name != "broken" || found.InvolvedObject.Kind != "ConfigMap" {
		t.Errorf("Event = %s %s on %s %s, want a Warning on ConfigMap broken", found.Type, found.Reason, found.InvolvedObject.Kind, found.InvolvedObject.Name)
	}
	if !strings.Contains(found.Message, "failed 3 or more times in a row: the quota is exhausted") {
		t.Errorf("Event message = %q, want the count and the error", found.Message)
	}
	list, err := events.List(t.Context(), ListOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.InvolvedObject.Name == "fine" {
			t.Errorf("an Event about the object that reconciles fine: %s %s", e.Reason, e.Message)
		}
	}
}

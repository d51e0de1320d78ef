package kctl

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObjectReferenceOf_KindAndAPIVersionFromTheGoType(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "7"}}
	got, err := ObjectReferenceOf(rs)
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "7"}
	if got != want {
		t.Errorf("ObjectReferenceOf = %+v, want %+v", got, want)
	}
	c, err := ObjectReferenceOf(&counter{ObjectMeta: metav1.ObjectMeta{Name: "c"}})
	if err != nil || c.APIVersion != "kctl.test/v1" || c.Kind != "Counter" {
		t.Errorf("ObjectReferenceOf a declared type = %+v, %v; want kctl.test/v1 Counter", c, err)
	}
	type unknown struct {
		metav1.TypeMeta
		metav1.ObjectMeta
	}
	if _, err := ObjectReferenceOf(&unknown{}); err == nil {
		t.Error("ObjectReferenceOf an undeclared type succeeded")
	}
}

// Issue 25, item 14: mgr.Enqueue reaches a controller by its name.
func TestManager_Enqueue_ByControllerName(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var manual atomic.Int32
	NewKeyController(mgr, "by-name", func(ctx context.Context, k Key) (Result, error) {
		if tr, _ := TriggerFrom(ctx); tr.Cause == "manual" && k.Name == "x" {
			manual.Add(1)
		}
		return Result{}, nil
	})
	if err := mgr.Enqueue("nobody", Key{Name: "x"}); err == nil || !strings.Contains(err.Error(), `the Manager has ["by-name"]`) {
		t.Errorf("Enqueue of an unknown controller = %v, want the known names listed", err)
	}
	if err := mgr.Enqueue("by-name", Key{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	eventually(t, "the key enqueued by name reconciled", func() bool { return manual.Load() == 1 })
}

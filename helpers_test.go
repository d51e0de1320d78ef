package kctl

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSetOwnerReference_AddsOnceKeepsControllerAndRefusesBadOwners(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o", UID: "u1"}}
	child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	if err := SetOwnerReference(owner, child); err != nil {
		t.Fatal(err)
	}
	if err := SetOwnerReference(owner, child); err != nil {
		t.Fatal(err)
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u1"}
	if refs := child.OwnerReferences; len(refs) != 1 || refs[0] != want {
		t.Fatalf("owner references = %+v, want one %+v", refs, want)
	}
	if metav1.GetControllerOf(child) != nil {
		t.Error("SetOwnerReference made the owner the controller")
	}
	// An existing controller reference to the same owner stays one.
	controller := true
	child.OwnerReferences[0].Controller = &controller
	if err := SetOwnerReference(owner, child); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(child); ref == nil || ref.UID != "u1" {
		t.Errorf("SetOwnerReference dropped the controller flag: %+v", child.OwnerReferences)
	}
	second := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u2"}}
	if err := SetOwnerReference(second, child); err != nil {
		t.Fatal(err)
	}
	if n := len(child.OwnerReferences); n != 2 {
		t.Errorf("a second owner gave %d references, want 2", n)
	}
	for _, tc := range []struct {
		owner *corev1.ConfigMap
		want  string
	}{
		{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}, "no UID yet"},
		{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "o", UID: "u3"}}, "in its dependent's namespace"},
	} {
		before := len(child.OwnerReferences)
		err := SetOwnerReference(tc.owner, child)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetOwnerReference(%s/%s) = %v, want %q", tc.owner.Namespace, tc.owner.Name, err, tc.want)
		}
		if len(child.OwnerReferences) != before {
			t.Errorf("a failed SetOwnerReference changed the references")
		}
	}
}

// Issue 25, item 6: OwnsEveryOwner enqueues every owner of type T.
func TestOwnsEveryOwner_EnqueuesEachOwnerNotOnlyTheController(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	secrets := ClientFor[corev1.Secret](mgr)
	var mu sync.Mutex
	owned := map[string]int{}
	seen := map[string]int{}
	c := NewController(mgr, "every-owner", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		tr, _ := TriggerFrom(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen[cm.Name]++
		if tr.Cause == "owned" {
			owned[cm.Name]++
		}
		return Result{}, nil
	})
	OwnsEveryOwner[corev1.Secret](c)
	startManager(t, mgr)
	ctx := t.Context()
	child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
	for _, name := range []string{"a", "b"} {
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cms.Create(ctx, owner); err != nil {
			t.Fatal(err)
		}
		if err := SetOwnerReference(owner, child); err != nil {
			t.Fatal(err)
		}
	}
	// The owners' own Added events must be reconciled first: a key still
	// queued for its creation keeps that cause when the Secret's event
	// queues it again.
	eventually(t, "both owners reconciled once", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["a"] > 0 && seen["b"] > 0
	})
	if err := secrets.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both owners reconciled for their shared Secret", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return owned["a"] > 0 && owned["b"] > 0
	})
}

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

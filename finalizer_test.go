package kctl

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripBig is a cache transform that drops what the controller never reads.
func stripBig(cm *corev1.ConfigMap) {
	delete(cm.Data, "big")
	delete(cm.Annotations, "big")
}

// A cache transform drops fields; the finalizer goes on and comes off; the
// server still has every field (a PUT of the cached copy would erase them).
func TestController_Finalizer_PatchesOnlyTheFinalizerAndKeepsFieldsTheCacheDrops(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	if err := TransformFor(mgr.Cache(), stripBig); err != nil {
		t.Fatal(err)
	}
	const fin, hold = "kctl.test/cleanup", "kctl.test/hold" // hold keeps the object after cleanup, to look at it
	c := NewController(mgr, "finalizer-patch", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		return Result{}, nil
	})
	c.Finalizer(fin, func(ctx context.Context, cm *corev1.ConfigMap) error { return nil })
	startManager(t, mgr)
	ctx := t.Context()
	server := NewClient[corev1.ConfigMap](mgr.conn)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f", Finalizers: []string{hold}, Annotations: map[string]string{"big": "a"}},
		Data:       map[string]string{"big": "payload", "small": "1"},
	}
	if err := server.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	check := func(when string, wantFinalizers ...string) {
		t.Helper()
		got, err := server.Get(ctx, ns, "f")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got.Data["big"] != "payload" || got.Data["small"] != "1" || got.Annotations["big"] != "a" {
			t.Errorf("%s: the server has data %v and annotations %v: a field the cache drops was erased", when, got.Data, got.Annotations)
		}
		if !slices.Equal(got.Finalizers, wantFinalizers) {
			t.Errorf("%s: finalizers = %v, want %v", when, got.Finalizers, wantFinalizers)
		}
	}
	eventually(t, "finalizer added", func() bool {
		got, err := server.Get(ctx, ns, "f")
		return err == nil && slices.Contains(got.Finalizers, fin)
	})
	check("after adding the finalizer", hold, fin)
	if err := server.Delete(ctx, ns, "f"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "finalizer removed", func() bool {
		got, err := server.Get(ctx, ns, "f")
		return err == nil && !slices.Contains(got.Finalizers, fin)
	})
	check("after removing the finalizer", hold)
	if err := server.Patch(ctx, cm, MergePatch, []byte(`{"metadata":{"finalizers":null}}`), PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// CreateOrUpdate through a cached client whose transform drops a field
// writes only what mutate changed, and a read gone stale fails with Conflict.
func TestCreateOrUpdate_KeepsFieldsTheCacheDropsAndConflictsOnAStaleRead(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	if err := TransformFor(mgr.Cache(), stripBig); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	ctx := t.Context()
	cms := ClientFor[corev1.ConfigMap](mgr)
	server := cms.Uncached()
	if err := server.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"},
		Data: map[string]string{"big": "payload", "small": "1"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache has the ConfigMap", func() bool { _, err := cms.Get(ctx, ns, "u"); return err == nil })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}
	op, err := CreateOrUpdate(ctx, cms, cm, func(cm *corev1.ConfigMap) error { cm.Data["small"] = "2"; return nil })
	if err != nil || op != OperationResultUpdated {
		t.Fatalf("CreateOrUpdate = %q, %v; want updated", op, err)
	}
	got, err := server.Get(ctx, ns, "u")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"big": "payload", "small": "2"}; !maps.Equal(got.Data, want) {
		t.Errorf("after CreateOrUpdate the server has %v, want %v", got.Data, want)
	}
	// Someone else writes between CreateOrUpdate's read and its write.
	op, err = CreateOrUpdate(ctx, server, cm, func(cm *corev1.ConfigMap) error {
		other := cm.DeepCopy()
		other.Data["other"] = "x"
		if err := server.Update(ctx, other); err != nil {
			return err
		}
		cm.Data["small"] = "3"
		return nil
	})
	if !apierrors.IsConflict(err) {
		t.Errorf("CreateOrUpdate after a concurrent write = %q, %v; want Conflict", op, err)
	}
	got, _ = server.Get(ctx, ns, "u")
	if b, _ := json.Marshal(got.Data); got.Data["small"] != "2" || got.Data["other"] != "x" {
		t.Errorf("after the refused write the server has %s, want small=2 and other=x", b)
	}
}

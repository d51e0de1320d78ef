package kctl

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Integration tests against the local control plane.

const gizmoCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.kctl.example.com"},
"spec":{"group":"kctl.example.com","scope":"Namespaced","names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo","listKind":"GizmoList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"size":{"type":"integer"},"color":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}},
"status":{"type":"object","properties":{"ready":{"type":"boolean"}}}}}}}]}}`

// installGizmoCRD applies the Gizmo CRD and waits until the server serves it.
func installGizmoCRD(t *testing.T, cfg *rest.Config) *Client[gizmo] {
	t.Helper()
	code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gizmoCRD)
	if code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("creating the Gizmo CRD: %d %s", code, body)
	}
	g := NewClient[gizmo](clientTestConn(t, cfg))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := g.List(t.Context(), ListOptions{Namespace: "default"})
		if err == nil {
			return g
		}
		if !errors.Is(err, ErrNotInstalled) || time.Now().After(deadline) {
			t.Fatalf("the Gizmo CRD is not served: %v", err)
		}
	}
}

// heardWrites is a writeNotes that keeps what it hears: the
// resourceVersion of each write, and each deletion as res ns/name uid.
type heardWrites struct {
	wrote   []string
	deleted []string
}

func (h *heardWrites) record(res Resource, obj metav1.Object) {
	h.wrote = append(h.wrote, obj.GetResourceVersion())
}

func (h *heardWrites) recordDelete(res Resource, namespace, name string, uid types.UID) {
	h.deleted = append(h.deleted, fmt.Sprintf("%s %s/%s %s", res.Plural, namespace, name, uid))
}

func TestClient_ConfigMap_CRUD_UpdatesInPlaceAndTellsItsNotes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	heard := &heardWrites{}
	cms.notes = heard
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"mode": "slow"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if cm.UID == "" || cm.ResourceVersion == "" || cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
		t.Errorf("after Create: uid %q rv %q %s %s; want them from the server", cm.UID, cm.ResourceVersion, cm.APIVersion, cm.Kind)
	}
	if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create: err = %v, want AlreadyExists", err)
	}
	got, err := cms.Get(ctx, ns, "settings")
	if err != nil || got.Data["mode"] != "slow" || got.Kind != "ConfigMap" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	got.Data["mode"] = "fast"
	if err := cms.Update(ctx, got); err != nil || got.ResourceVersion == cm.ResourceVersion {
		t.Fatalf("Update: %v, rv %s (was %s)", err, got.ResourceVersion, cm.ResourceVersion)
	}
	cm.Data["mode"] = "stale"
	if err := cms.Update(ctx, cm); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion: err = %v, want Conflict", err)
	}
	list, err := cms.List(ctx, ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if err != nil || len(list) != 1 || list[0].Data["mode"] != "fast" {
		t.Errorf("List = %d items, %v; want settings with mode fast", len(list), err)
	}
	if err := cms.Delete(ctx, ns, "settings"); err != nil {
		t.Fatal(err)
	}
	_, err = cms.Get(ctx, ns, "settings")
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), `"settings" not found`) {
		t.Errorf("Get after Delete: err = %v, want NotFound (not ErrNotInstalled)", err)
	}
	// A ConfigMap's delete answers a Status, not the object: record sees only the create and the update.
	if w := heard.wrote; len(w) != 2 || w[0] != cm.ResourceVersion || w[1] != got.ResourceVersion {
		t.Errorf("record saw %v, want the resourceVersions of the create and the update", w)
	}
	if want := fmt.Sprintf("configmaps %s/settings %s", ns, cm.UID); len(heard.deleted) != 1 || heard.deleted[0] != want {
		t.Errorf("recordDelete saw %q, want [%q]", heard.deleted, want)
	}
}

func TestClient_CRD_CRUDStatusPatchesApplyAndWatch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	g := installGizmoCRD(t, cfg)
	ctx := t.Context()
	w, err := g.watch(ctx, ListOptions{Namespace: ns}, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	obj := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}, Spec: gizmoSpec{Size: 1, Color: "red"}}
	if err := g.Create(ctx, obj); err != nil || obj.UID == "" || obj.Kind != "Gizmo" {
		t.Fatalf("Create: %v, %+v", err, obj)
	}
	obj.Spec.Size, obj.Status.Ready = 2, true
	if err := g.Update(ctx, obj); err != nil || obj.Spec.Size != 2 || obj.Status.Ready {
		t.Errorf("Update: %v, %+v; want size 2 and the status change ignored", err, obj)
	}
	obj.Status.Ready = true
	if err := g.UpdateStatus(ctx, obj); err != nil || !obj.Status.Ready {
		t.Errorf("UpdateStatus: %v, %+v", err, obj.Status)
	}
	got := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1"}}
	err = g.Patch(ctx, got, MergePatch, []byte(`{"spec":{"color":"blue"}}`), PatchOptions{})
	if err != nil || got.Spec.Color != "blue" || got.Spec.Size != 2 {
		t.Errorf("merge patch: %v, %+v", err, got)
	}
	err = g.Patch(ctx, got, JSONPatch, []byte(`[{"op":"add","path":"/spec/tags","value":["a"]}]`), PatchOptions{})
	if err != nil || len(got.Spec.Tags) != 1 {
		t.Errorf("JSON patch: %v, %+v", err, got)
	}
	if err := g.Patch(ctx, got, StrategicMergePatch, []byte(`{}`), PatchOptions{}); err == nil {
		t.Error("strategic merge patch of a CRD: no error")
	}
	a := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g2"}, Spec: gizmoSpec{Size: 7}}
	if err := g.Apply(ctx, a, PatchOptions{FieldManager: "kctl-test"}); err != nil || a.UID == "" || a.Spec.Size != 7 {
		t.Errorf("Apply: %v, %+v", err, a)
	}
	if err := g.Delete(ctx, ns, "g1"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for !seen["DELETED g1"] {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch ended before the delete of g1: %v (saw %v)", err, seen)
		}
		if ev.Err != nil || ev.Object == nil {
			t.Fatalf("watch event %s: %v", ev.Type, ev.Err)
		}
		seen[ev.Type+" "+ev.Object.Name] = true
	}
	if !seen["ADDED g1"] || !seen["MODIFIED g1"] || !seen["ADDED g2"] {
		t.Errorf("watch saw %v, want ADDED, MODIFIED and DELETED of g1 and ADDED of g2", seen)
	}
}

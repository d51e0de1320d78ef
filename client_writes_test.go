package kctl

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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

func testDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
	}
}

func TestClient_Deployment_StatusEveryPatchKindAndApply(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	deps := NewClient[appsv1.Deployment](clientTestConn(t, cfg))
	ctx := t.Context()
	d := testDeployment(ns, "web")
	if err := deps.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = d.Generation
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "Test"}}
	if err := deps.UpdateStatus(ctx, d); err != nil || len(d.Status.Conditions) != 1 {
		t.Fatalf("UpdateStatus: %v, conditions %v", err, d.Status.Conditions)
	}
	containers := func(d *appsv1.Deployment) (names []string) {
		for _, c := range d.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		return names
	}
	side := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}`)
	got := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	err := deps.Patch(ctx, got, StrategicMergePatch, side, PatchOptions{})
	if err != nil || len(containers(got)) != 2 {
		t.Errorf("strategic merge patch adding a container: %v, containers %v; want web and sidecar", err, containers(got))
	}
	err = deps.Patch(ctx, got, MergePatch, side, PatchOptions{})
	if err != nil || len(containers(got)) != 1 || containers(got)[0] != "sidecar" {
		t.Errorf("merge patch of the containers: %v, containers %v; want sidecar alone (lists are replaced)", err, containers(got))
	}
	err = deps.Patch(ctx, got, JSONPatch, []byte(`[{"op":"replace","path":"/spec/replicas","value":3}]`), PatchOptions{})
	if err != nil || *got.Spec.Replicas != 3 {
		t.Errorf("JSON patch of replicas: %v, %v", err, got)
	}
	err = deps.Patch(ctx, got, MergePatch, []byte(`{"status":{"observedGeneration":42}}`), PatchOptions{Subresource: "status"})
	if err != nil || got.Status.ObservedGeneration != 42 {
		t.Errorf("merge patch of the status subresource: %v, %+v", err, got.Status)
	}
	applied := testDeployment(ns, "applied")
	if err := deps.Apply(ctx, applied, PatchOptions{FieldManager: "kctl-test"}); err != nil || applied.UID == "" {
		t.Fatalf("Apply of a typed Deployment: %v", err)
	}
	other := testDeployment(ns, "applied")
	other.Spec.Replicas = new(int32(5))
	if err := deps.Apply(ctx, other, PatchOptions{FieldManager: "someone-else"}); !apierrors.IsConflict(err) {
		t.Errorf("Apply of a field another manager owns: err = %v, want Conflict", err)
	}
	if err := deps.Apply(ctx, other, PatchOptions{FieldManager: "someone-else", Force: true}); err != nil || *other.Spec.Replicas != 5 {
		t.Errorf("forced Apply: %v, replicas %v", err, other.Spec.Replicas)
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

// configMapApply is shaped as client-go's generated apply configurations
// are (every field a pointer or a map with omitempty, TypeMeta inline):
// importing those would add modules to go.mod.
type configMapApply struct {
	Kind       *string           `json:"kind,omitempty"`
	APIVersion *string           `json:"apiVersion,omitempty"`
	Metadata   *objectMetaApply  `json:"metadata,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
}

type objectMetaApply struct {
	Name      *string `json:"name,omitempty"`
	Namespace *string `json:"namespace,omitempty"`
}

func applyOf(kind, name, ns string, data map[string]string) *configMapApply {
	v1 := "v1"
	return &configMapApply{Kind: &kind, APIVersion: &v1, Metadata: &objectMetaApply{Name: &name, Namespace: &ns}, Data: data}
}

// Issue 25, item 8: ApplyConfig sends only the fields an apply
// configuration sets.
func TestClient_ApplyConfig_SendsOnlyTheFieldsItSets(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: map[string]string{"keep": "me"}},
		Data: map[string]string{"theirs": "1"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	ac := applyOf("ConfigMap", "a", ns, map[string]string{"mine": "2"})
	got, err := cms.ApplyConfig(ctx, ac, PatchOptions{FieldManager: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["theirs"] != "1" || got.Data["mine"] != "2" || got.Labels["keep"] != "me" {
		t.Errorf("after ApplyConfig: data %v labels %v, want theirs=1 mine=2 and the label kept", got.Data, got.Labels)
	}
	// Any value that marshals to the object's JSON; apiVersion and kind from T.
	plain := map[string]any{"metadata": map[string]any{"name": "a", "namespace": ns}, "data": map[string]string{"mine": "3"}}
	got, err = cms.ApplyConfig(ctx, plain, PatchOptions{FieldManager: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["mine"] != "3" || got.Data["theirs"] != "1" {
		t.Errorf("after the second ApplyConfig: data %v, want theirs=1 mine=3", got.Data)
	}
	wrong := applyOf("Secret", "a", ns, nil)
	_, err = cms.ApplyConfig(ctx, wrong, PatchOptions{FieldManager: "mine"})
	if err == nil || !strings.Contains(err.Error(), "of v1 Secret") {
		t.Errorf("ApplyConfig of a Secret's configuration = %v, want its kind named", err)
	}
	_, err = cms.ApplyConfig(ctx, applyOf("ConfigMap", "a", ns, nil), PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "FieldManager") {
		t.Errorf("ApplyConfig without a FieldManager = %v, want it asked for", err)
	}
}

func TestClient_DeleteWithOptions_PreconditionsAndPropagation(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cms.DeleteWithOptions(ctx, ns, "c", DeleteOptions{UID: "not-the-uid"}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a wrong UID precondition: err = %v, want Conflict", err)
	}
	if err := cms.DeleteWithOptions(ctx, ns, "c", DeleteOptions{ResourceVersion: "1"}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a stale resourceVersion precondition: err = %v, want Conflict", err)
	}
	opts := DeleteOptions{UID: cm.UID, ResourceVersion: cm.ResourceVersion, Propagation: metav1.DeletePropagationForeground, GracePeriodSeconds: new(int64(0))}
	if err := cms.DeleteWithOptions(ctx, ns, "c", opts); err != nil {
		t.Errorf("delete with matching preconditions: %v", err)
	}
}

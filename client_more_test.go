package kctl

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Integration tests of a Client's further verbs (client_more.go) against
// the local control plane.

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

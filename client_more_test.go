package kctl

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

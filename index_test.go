package kctl

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 13: an index declared on the Manager, listed by with a
// typed selector whose value may hold "," and "=".
func TestIndexField_DeclaredOnTheManager_ListsByEscapedValue(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	owner := func(cm *corev1.ConfigMap) []string { return []string{cm.Data["owner"]} }
	if err := IndexField(mgr, "data.owner", owner); err != nil {
		t.Fatal(err)
	}
	if err := IndexField(mgr, "data.owner", owner); err == nil || !strings.Contains(err.Error(), `index "data.owner" is already defined`) {
		t.Errorf("a second IndexField of one name = %v, want an error naming it", err)
	}
	if err := IndexField(mgr, "", owner); err == nil {
		t.Error("IndexField with an empty name succeeded")
	}
	cms := ClientFor[corev1.ConfigMap](mgr)
	startManager(t, mgr)
	ctx := t.Context()
	for name, o := range map[string]string{"a": "x=1,y=2", "b": "x=1", "c": "y=2"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"owner": o}}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	names := func(sel string) []string {
		t.Helper()
		list, err := cms.List(ctx, ListOptions{Namespace: ns, Fields: sel})
		if err != nil {
			t.Fatalf("List(%q): %v", sel, err)
		}
		var out []string
		for _, cm := range list {
			out = append(out, cm.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(MatchingField("data.owner", "x=1,y=2")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("List by owner x=1,y=2 = %v, want [a]", got)
	}
	if got := names(MatchingField("data.owner", "x=1") + "," + MatchingField("metadata.name", "b")); !slices.Equal(got, []string{"b"}) {
		t.Errorf("List by owner x=1 and name b = %v, want [b]", got)
	}
}

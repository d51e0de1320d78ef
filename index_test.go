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

// unindexedAgreesWithTheServer lists T with selector from the cache, which
// has no index for it, and checks its error against the real server: it
// suggests Uncached() exactly when an uncached List with the selector
// works, and always IndexField.
func unindexedAgreesWithTheServer[T any, PT Object[T]](t *testing.T, mgr *Manager, ns, selector string) {
	t.Helper()
	c := ClientFor[T, PT](mgr)
	opts := ListOptions{Namespace: ns, Fields: selector}
	got, err := c.List(t.Context(), opts)
	if err == nil {
		t.Errorf("cached List of %s (fields %q) = %d objects, nil; want an error", typeName[T](), selector, len(got))
		return
	}
	if !strings.Contains(err.Error(), "kctl.IndexField(mgr, ") {
		t.Errorf("cached List of %s (fields %q): %v; want it to suggest IndexField", typeName[T](), selector, err)
	}
	suggested := strings.Contains(err.Error(), "or list with Uncached()")
	_, serverErr := c.Uncached().List(t.Context(), opts)
	switch {
	case suggested && serverErr != nil:
		t.Errorf("cached List of %s (fields %q) suggests Uncached(): %v\nbut the server refuses it: %v", typeName[T](), selector, err, serverErr)
	case !suggested && serverErr == nil:
		t.Errorf("cached List of %s (fields %q) does not suggest Uncached(), which works: %v", typeName[T](), selector, err)
	case !suggested && !strings.Contains(err.Error(), "not Uncached()"):
		t.Errorf("cached List of %s (fields %q): %v; want it to say that Uncached() fails too", typeName[T](), selector, err)
	}
}

// Issue 25, item 13: a cached List on a field without an index suggested
// "or list with Uncached()" for every field, though the server knows only
// its field labels (a custom index name is not one). The error now
// suggests Uncached() only where the real server takes the selector.
func TestCachedList_UnindexedField_SuggestsUncachedOnlyWhereTheServerFilters(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	startManager(t, mgr)
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, "spec.nodeName=n1")
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, "status.phase=Running,spec.nodeName!=n1")
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, "spec.nodeName=n1,data.x=y")
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, MatchingField("spec.owner", "a=b,c"))
	unindexedAgreesWithTheServer[corev1.ConfigMap](t, mgr, ns, "data.owner=me")
	unindexedAgreesWithTheServer[corev1.Secret](t, mgr, ns, "type=Opaque")
	unindexedAgreesWithTheServer[corev1.Service](t, mgr, ns, "spec.type=ClusterIP")
	unindexedAgreesWithTheServer[corev1.Event](t, mgr, ns, "involvedObject.name=x,reason=y")
	unindexedAgreesWithTheServer[corev1.Event](t, mgr, ns, "regarding.name=x")
}

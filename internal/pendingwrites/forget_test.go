package pendingwrites

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A write the cache will never see (its namespace left the cache's
// share) is forgotten by Forget, and only that one.
func TestTracker_Forget_DropsOnlyThatWrite(t *testing.T) {
	res := "configmaps/v1"
	w := New()
	w.Track(res, func(metav1.Object) bool { return true })
	w.Record(res, &metav1.ObjectMeta{Namespace: "a", Name: "x", ResourceVersion: "10"})
	w.Record(res, &metav1.ObjectMeta{Namespace: "b", Name: "y", ResourceVersion: "11"})
	w.Forget(res, "a", "x")
	if got := len(w.In(res, "a", "")); got != 0 {
		t.Errorf("after Forget(a/x), In(a) has %d writes, want 0", got)
	}
	if got := len(w.In(res, "b", "y")); got != 1 {
		t.Errorf("after Forget(a/x), In(b/y) has %d writes, want 1", got)
	}
	w.Forget(res, "b", "y")
	w.Forget(res, "b", "y") // nothing left: no-op
	if w.Len() != 0 {
		t.Errorf("%d resources have pending writes, want none", w.Len())
	}
}

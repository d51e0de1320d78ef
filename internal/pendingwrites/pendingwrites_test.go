package pendingwrites

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestTracker_KeepsWritesUntilTheCacheHasThem(t *testing.T) {
	res := "configmaps/v1"
	other := "secrets/v1"
	w := New()
	w.Track(res, func(obj metav1.Object) bool { return obj.GetNamespace() == "in" }) // a cache of namespace "in"
	obj := func(ns, name, rv, uid string) metav1.Object {
		return &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, UID: types.UID(uid)}
	}
	pending := func(step string, ns, name string, want int) {
		t.Helper()
		if got := len(w.In(res, ns, name)); got != want {
			t.Errorf("%s: In(%q, %q) has %d writes, want %d", step, ns, name, got, want)
		}
	}
	w.Record(res, obj("in", "a", "10", "u1"))
	w.Record(res, obj("out", "b", "10", "u2"))  // the cache does not hold it: nothing to wait for
	w.Record(other, obj("in", "c", "10", "u3")) // not a tracked resource
	pending("after the writes", "", "", 1)
	pending("after the writes", "in", "a", 1)
	pending("after the writes", "out", "", 0)
	if got := len(w.In(other, "", "")); got != 0 {
		t.Errorf("an untracked resource has %d writes, want 0", got)
	}
	w.Record(res, obj("in", "a", "9", "u1")) // a slower racing write: the newer one stays
	w.CaughtUp(res, obj("in", "a", "9", "u1"), false)
	pending("after the cache stored an older version", "in", "a", 1)
	w.CaughtUp(res, obj("in", "a", "11", "u1"), false)
	pending("after the cache stored a newer version", "in", "a", 0)

	w.RecordDelete(res, "in", "a", "u1")
	w.CaughtUp(res, obj("in", "a", "12", "u1"), false)
	pending("after an update of the deleted object", "in", "", 1)
	w.CaughtUp(res, obj("in", "a", "13", "u1"), true)
	pending("after the cache dropped the deleted object", "in", "", 0)
	w.RecordDelete(res, "in", "a", "u1")
	w.CaughtUp(res, obj("in", "a", "14", "u9"), false) // created again: the old one is gone
	pending("after the cache stored a new object of that name", "in", "", 0)
	if w.Len() != 0 {
		t.Errorf("%d resources have pending writes, want none once every write is caught up", w.Len())
	}
}

package kctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 15 item 7: objects that stop decoding into T.

func badKey(ns, name, rv string) *decodeError {
	return &decodeError{Namespace: ns, Name: name, ResourceVersion: rv, err: errors.New("kctl: decoding " + ns + "/" + name + ": bad")}
}

// A relist takes an object it lists but cannot decode for one that exists:
// its last good copy stays, and nothing is reported for it.
func TestStore_Replace_NeverTakesAnUndecodableObjectForDeleted(t *testing.T) {
	s := newStore[corev1.ConfigMap]()
	var got []string
	changed := func(typ EventType, obj, _ *corev1.ConfigMap) {
		got = append(got, fmt.Sprintf("%v %s@%s", typ, obj.Name, obj.ResourceVersion))
	}
	step := func(n int, want ...string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("step %d: replace reported %q, want %q", n, got, want)
		}
		got = nil
	}
	b1 := storeCM("x", "b", "2", nil)
	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil), b1, storeCM("x", "c", "3", nil)}, nil, changed)
	got = nil

	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil)}, []*decodeError{badKey("x", "b", "4"), badKey("x", "never", "5")}, changed)
	step(1, "Deleted c@3")
	if b, ok := s.get("x", "b"); !ok || b != b1 {
		t.Errorf("step 1: get(x, b) = %v, %v; want the last good copy b@2", b, ok)
	}
	if len(s.bad) != 2 {
		t.Errorf("step 1: %d objects marked undecodable, want b and never", len(s.bad))
	}

	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil), storeCM("x", "b", "6", nil)}, nil, changed)
	step(2, "Updated b@6") // b decodes again; never is gone from the server
	if len(s.bad) != 0 {
		t.Errorf("step 2: %d objects still marked undecodable, want none", len(s.bad))
	}

	s.markBad(objKey{"x", "b"}, badKey("x", "b", "7")) // by a watch event
	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil)}, nil, changed)
	step(3, "Deleted b@6") // deleted while undecodable: its last good copy goes
	if len(s.bad) != 0 {
		t.Errorf("step 3: %d objects still marked undecodable, want none", len(s.bad))
	}

	s.replace("", []*corev1.ConfigMap{storeCM("x", "d", "8", nil)}, []*decodeError{{err: errors.New("no metadata")}}, changed)
	step(4, "Added d@8") // one undecodable without a key: a might be it, so it is kept
	if _, ok := s.get("x", "a"); !ok {
		t.Errorf("step 4: a was deleted by a list with an object of unknown key")
	}
}

// rawWidgetList answers a list with items given as raw JSON.
func rawWidgetList(c fakeCall, rv string, items ...string) {
	c.w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(c.w, `{"apiVersion":"cachetest.kctl.dev/v1","kind":"WidgetList","metadata":{"resourceVersion":%q},"items":[%s]}`,
		rv, strings.Join(items, ","))
}

func rawWidget(name, rv, size string) string {
	return fmt.Sprintf(`{"metadata":{"namespace":"default","name":%q,"resourceVersion":%q},"spec":{"size":%s}}`, name, rv, size)
}

// An object that stops decoding keeps its last good copy across updates and
// a relist, its delete removes it (Deleted with that copy), one that decodes
// again comes back, and each is logged once.
func TestInformerFault_ObjectThatStopsDecoding_IsKeptUntilDeletedAndReportedOnce(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.n == 1:
			rawWidgetList(c, "2", rawWidget("a", "1", "1"), rawWidget("b", "2", `"huge"`))
		case c.kind == "list":
			rawWidgetList(c, "4", rawWidget("a", "4", `"huger"`), rawWidget("b", "2", `"huge"`))
		case c.n == 1:
			c.send("MODIFIED", json.RawMessage(rawWidget("a", "3", `"big"`)))
			c.send("MODIFIED", json.RawMessage(rawWidget("a", "4", `"huger"`)))
			c.send("ERROR", json.RawMessage(fakeStatusJSON(410, metav1.StatusReasonExpired, "too old resource version: 2 (4)")))
			c.hang()
		case c.n == 2:
			c.send("DELETED", json.RawMessage(rawWidget("a", "5", `"huger"`)))
			c.send("MODIFIED", json.RawMessage(rawWidget("b", "6", "2")))
			c.hang()
		default:
			c.hang()
		}
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	wantEvents(t, rec, "Added a@1 initial", "Deleted a@1", "Added b@6")
	if n := inf.Undecodable(); n != 0 {
		t.Errorf("Undecodable() = %d at the end, want 0", n)
	}
	if _, ok := inf.Get("default", "a"); ok {
		t.Errorf("a is still cached after its delete")
	}
	if got := f.count("list"); got != 2 {
		t.Errorf("%d lists, want 2 (the relist must have run)", got)
	}
	bad := logs.lines("could not decode an object: it keeps")
	if len(bad) != 2 || !strings.Contains(bad[0], "default/b") || !strings.Contains(bad[1], "default/a") {
		t.Errorf("want one log line for b (the first list) and one for a (its first bad update), got:\n%s", logs)
	}
	if again := logs.lines("decodes an object again"); len(again) != 1 || !strings.Contains(again[0], "default/b") {
		t.Errorf("want one log line saying b decodes again, got:\n%s", logs)
	}
}

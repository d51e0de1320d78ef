package kctl

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Unit tests of the store: no goroutines, no server.

func storeCM(ns, name, rv string, lbls map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, Labels: lbls}}
}

// storeList lists as Informer.List does: building a label index it asks for.
func storeList[P any](s *store[P], namespace string, sel labels.Selector) []P {
	out, missing := s.list(namespace, sel, nil)
	for asked := map[string]bool{}; missing != ""; out, missing = s.list(namespace, sel, nil) {
		if asked[missing] {
			panic("list asked twice for the index of label " + missing)
		}
		asked[missing] = true
		s.labelIndex(missing)
	}
	return out
}

// A List answered from a label index returns exactly what testing every
// object returns, while objects come, change labels and go.
func TestStore_List_LabelIndexAgreesWithAScan(t *testing.T) {
	s := newStore[*corev1.ConfigMap]()
	selectors := []string{"", "app=web", "app==db", "app in (web,db)", "app=web,tier=front", "tier in (front),app!=db",
		"app!=web", "app", "!app", "tier=back,app notin (web)", "app=none"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	for step := range 2000 {
		ns, name := pick("x", "y", "z"), pick("a", "b", "c", "d", "e", "f")
		if rng.IntN(4) == 0 {
			s.remove(ns, name)
		} else {
			lbls := map[string]string{}
			if v := pick("web", "db", "cache", ""); v != "" {
				lbls["app"] = v
			}
			if v := pick("front", "back", ""); v != "" {
				lbls["tier"] = v
			}
			s.put(storeCM(ns, name, fmt.Sprint(step), lbls))
		}
		for _, text := range selectors {
			sel, err := labels.Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range []string{"", "x", "y"} {
				var want []*corev1.ConfigMap
				for _, inner := range s.objects {
					for _, e := range inner {
						if (ns == "" || e.obj.Namespace == ns) && sel.Matches(labels.Set(e.obj.Labels)) {
							want = append(want, e.obj)
						}
					}
				}
				got := storeList(s, ns, sel)
				if storeNames(got) != storeNames(want) {
					t.Fatalf("step %d: list(%q, %q) = %s, a scan finds %s", step, ns, text, storeNames(got), storeNames(want))
				}
			}
		}
	}
	if s.indexes.Label("app") == nil || s.indexes.Label("tier") == nil {
		t.Errorf("%d indexes: want label indexes of app and tier", s.indexes.Len())
	}
}

func storeNames(objs []*corev1.ConfigMap) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestStore_Replace_ReportsOnlyWhatChanged(t *testing.T) {
	s := newStore[*corev1.ConfigMap]()
	var got []string
	changed := func(typ EventType, obj, old *corev1.ConfigMap) {
		e := fmt.Sprintf("%v %s/%s@%s", typ, obj.Namespace, obj.Name, obj.ResourceVersion)
		if old != nil {
			e += " from " + old.ResourceVersion
		}
		got = append(got, e)
	}
	a1 := storeCM("x", "a", "1", nil)
	s.replace("", []*corev1.ConfigMap{a1, storeCM("x", "b", "2", nil), storeCM("y", "c", "3", nil)}, nil, changed)
	got = nil
	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil), storeCM("x", "b", "5", nil), storeCM("z", "d", "6", nil)}, nil, changed)
	slices.Sort(got)
	want := []string{"Added z/d@6", "Deleted y/c@3", "Updated x/b@5 from 2"}
	if !slices.Equal(got, want) {
		t.Errorf("replace reported %q, want %q", got, want)
	}
	if a, _ := s.get("x", "a"); a != a1 {
		t.Errorf("an unchanged object was replaced")
	}
	if _, ok := s.objects["y"]; ok || s.count != 3 {
		t.Errorf("after replace: namespaces %v, count %d; want y gone and 3 objects", s.objects, s.count)
	}
}

func TestStore_ReplaceOneNamespace_LeavesTheOthers(t *testing.T) {
	s := newStore[*corev1.ConfigMap]()
	nop := func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {}
	s.replace("x", []*corev1.ConfigMap{storeCM("x", "a", "1", nil)}, nil, nop)
	s.replace("y", []*corev1.ConfigMap{storeCM("y", "b", "2", nil)}, nil, nop)
	var deleted []string
	s.replace("x", nil, nil, func(typ EventType, obj, _ *corev1.ConfigMap) { deleted = append(deleted, typ.String()+" "+obj.Name) })
	if !slices.Equal(deleted, []string{"Deleted a"}) || s.count != 1 {
		t.Errorf("replacing x with nothing reported %q and left %d objects; want [Deleted a] and 1", deleted, s.count)
	}
	if _, ok := s.get("y", "b"); !ok {
		t.Errorf("replacing namespace x removed y/b")
	}
}

func TestStore_Indexes_FollowPutsRemovesAndReplaces(t *testing.T) {
	s := newStore[*corev1.ConfigMap]()
	s.put(storeCM("x", "a", "1", map[string]string{"app": "web"}))
	if err := s.addIndex("app", func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["app"]} }); err != nil {
		t.Fatal(err)
	}
	s.put(storeCM("y", "b", "2", map[string]string{"app": "web"}))
	s.put(storeCM("x", "a", "3", map[string]string{"app": "db"}))
	names := func(objs []*corev1.ConfigMap) string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Namespace+"/"+o.Name)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	for _, c := range []struct{ value, want string }{{"web", "y/b"}, {"db", "x/a"}, {"none", ""}} {
		if got := names(s.byIndex("app", c.value)); got != c.want {
			t.Errorf("byIndex(app, %s) = %q, want %q", c.value, got, c.want)
		}
	}
	s.remove("y", "b")
	s.replace("x", nil, nil, func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {})
	if n := s.indexes.Get("app").Len(); n != 0 || s.count != 0 || s.bytes != 0 {
		t.Errorf("after removing everything: index of %d values, count %d, bytes %d; want all empty", n, s.count, s.bytes)
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	s.put(storeCM("x", "c", "4", map[string]string{"app": "web"}))
	s.put(storeCM("y", "d", "5", map[string]string{"app": "db"}))
	if got := names(storeList(s, "", web)); got != "x/c" {
		t.Errorf("list(all, app=web) = %q, want x/c", got)
	}
	if got := names(storeList(s, "y", nil)); got != "y/d" {
		t.Errorf("list(y) = %q, want y/d", got)
	}
	s.setSize(s.objects["x"]["c"].obj, 100)
	s.put(storeCM("x", "c", "6", nil))
	s.setSize(s.objects["y"]["d"].obj, 50)
	if s.bytes != 50 {
		t.Errorf("bytes = %d, want 50: the size of the replaced x/c must be dropped", s.bytes)
	}
}

// Of two indexed keys, List looks up the one with fewer objects: the Pods of
// one ReplicaSet (pod-template-hash) rather than of the whole app.
func TestStore_List_PicksTheNarrowestLabelIndex(t *testing.T) {
	s := newStore[*corev1.ConfigMap]()
	for i := range 10 {
		s.put(storeCM("x", fmt.Sprint("p", i), "1", map[string]string{"app": "web", "pod-template-hash": fmt.Sprint("h", i%5)}))
	}
	sel, _ := labels.Parse("app=web,pod-template-hash=h1")
	if got := storeNames(storeList(s, "x", sel)); got != "x/p1,x/p6" {
		t.Fatalf("list = %s, want x/p1,x/p6", got)
	}
	ix, values, missing := s.indexes.ForLabels(sel)
	if ix != s.indexes.Label("pod-template-hash") || !slices.Equal(values, []string{"h1"}) || missing != "" {
		t.Errorf("looked up %v in the index %p (missing %q), want h1 in pod-template-hash's %p",
			values, ix, missing, s.indexes.Label("pod-template-hash"))
	}
}

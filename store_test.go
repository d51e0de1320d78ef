package kctl

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/mailbox"
	"github.com/kctl-dev/kctl/internal/share"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
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

// mustList is inf.List that fails the test on an error.
func mustList[T any](t *testing.T, inf *Informer[T], opts ListOptions) []*T {
	t.Helper()
	out, err := inf.List(opts)
	if err != nil {
		t.Fatalf("List(%+v): %v", opts, err)
	}
	return out
}

// offlineInformer is a ConfigMap informer that is never started: tests fill
// its store by hand.
func offlineInformer(t *testing.T, scope Scope) *Informer[corev1.ConfigMap] {
	t.Helper()
	conn, err := NewConn(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{})
	if err := ScopeFor[corev1.ConfigMap](c, scope); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	return inf
}

func modeOf(cm *corev1.ConfigMap) []string {
	if v, ok := cm.Data["mode"]; ok {
		return []string{v}
	}
	return nil
}

// A List with a field selector returns exactly what evaluating the selector
// on every object returns (the index "data.mode" standing for the field),
// while objects come, change and go.
func TestInformer_List_FieldSelectorAgreesWithAScan(t *testing.T) {
	inf := offlineInformer(t, Scope{})
	if err := inf.AddIndex("data.mode", modeOf); err != nil {
		t.Fatal(err)
	}
	selectors := []struct{ labels, fields string }{
		{"", "metadata.name=a"}, {"", "metadata.name==b,metadata.namespace=x"}, {"", "metadata.name!=a"},
		{"", "metadata.namespace=y"}, {"", "metadata.namespace!=y"}, {"", "data.mode=fast"}, {"", "data.mode!=fast"},
		{"app=web", "data.mode=slow"}, {"app in (web,db)", "data.mode=fast,metadata.name!=c"},
		{"", "metadata.namespace=x,metadata.namespace=y"}, {"app=web", "metadata.name=a,data.mode=fast"}, {"", ""},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	for step := range 1000 {
		ns, name := pick("x", "y", "z"), pick("a", "b", "c", "d")
		inf.mu.Lock()
		if rng.IntN(4) == 0 {
			inf.store.remove(ns, name)
		} else {
			cm := storeCM(ns, name, fmt.Sprint(step), map[string]string{"app": pick("web", "db", "cache")})
			if mode := pick("fast", "slow", ""); mode != "" {
				cm.Data = map[string]string{"mode": mode}
			}
			inf.store.put(cm)
		}
		inf.mu.Unlock()
		for _, sel := range selectors {
			lsel, err := labels.Parse(sel.labels)
			if err != nil {
				t.Fatal(err)
			}
			fsel, err := fields.ParseSelector(sel.fields)
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range []string{"", "x", "y"} {
				var want []*corev1.ConfigMap
				for _, inner := range inf.store.objects {
					for _, e := range inner {
						set := fields.Set{"metadata.name": e.obj.Name, "metadata.namespace": e.obj.Namespace, "data.mode": e.obj.Data["mode"]}
						if (ns == "" || e.obj.Namespace == ns) && lsel.Matches(labels.Set(e.obj.Labels)) && fsel.Matches(set) {
							want = append(want, e.obj)
						}
					}
				}
				opts := ListOptions{Namespace: ns, Labels: lsel, Fields: sel.fields}
				if got := mustList(t, inf, opts); storeNames(got) != storeNames(want) {
					t.Fatalf("step %d: List(namespace %q, labels %q, fields %q) = %s, a scan finds %s",
						step, ns, sel.labels, sel.fields, storeNames(got), storeNames(want))
				}
			}
		}
	}
}

// Issue 15 item 6: a cached List ignored its field selector and returned
// every object. A field the cache cannot evaluate is an error naming it.
func TestInformer_List_FieldSelectorItCannotEvaluate_IsAnErrorNamingIt(t *testing.T) {
	inf := offlineInformer(t, Scope{Fields: "metadata.namespace!=kube-system,data.tier=gold"})
	if err := inf.AddIndex("data.mode", modeOf); err != nil {
		t.Fatal(err)
	}
	inf.mu.Lock()
	inf.store.put(storeCM("x", "a", "1", nil))
	inf.store.put(storeCM("x", "b", "1", nil))
	inf.mu.Unlock()
	for _, tc := range []struct {
		fields string
		want   []string // in the error; none: no error
		names  string   // else the objects listed
	}{
		{fields: "data.owner=me", want: []string{`"data.owner=me"`, "data.owner has no index", `kctl.IndexField(mgr, "data.owner", fn)`,
			"not Uncached(): the API server filters configmaps/v1 only by metadata.name, metadata.namespace, data.tier, not by data.owner"}},
		{fields: "metadata.name=a,spec.nodeName=n,status.phase!=Running", want: []string{"spec.nodeName, status.phase has no index"}},
		{fields: "metadata.name in (a)", want: []string{"bad field selector"}},
		{fields: "data.tier=gold", names: "x/a,x/b"},                                                      // the scope's own: every cached object meets it
		{fields: "data.tier=silver", want: []string{"data.tier has no index", "or list with Uncached()"}}, // not the scope's, but the server took it
		{fields: "metadata.namespace!=kube-system,metadata.name=b", names: "x/b"},                         // one of the scope's, one evaluated
		{fields: "data.mode=fast", names: ""},                                                             // indexed
	} {
		got, err := inf.List(ListOptions{Fields: tc.fields})
		switch {
		case len(tc.want) == 0 && err != nil:
			t.Errorf("List(fields %q): %v", tc.fields, err)
		case len(tc.want) == 0 && storeNames(got) != tc.names:
			t.Errorf("List(fields %q) = %s, want %s", tc.fields, storeNames(got), tc.names)
		case len(tc.want) > 0 && err == nil:
			t.Errorf("List(fields %q) = %s, nil; want an error (the cache must never ignore a selector)", tc.fields, storeNames(got))
		case len(tc.want) > 0:
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("List(fields %q) error %q does not contain %q", tc.fields, err, w)
				}
			}
			if strings.Count(err.Error(), "kctl:") != 1 {
				t.Errorf("List(fields %q) error %q: want exactly one kctl: prefix", tc.fields, err)
			}
		}
	}
}

// The same through a Manager's cached Client against the server: a cached
// List with a field selector returns what the server returns, or an error.
func TestClient_CachedListWithFieldSelector_MatchesTheServerOrFails(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	m := testManager(t, cfg, ns, Options{})
	cms := ClientFor[corev1.ConfigMap](m)
	ctx := cacheTestCtx(t)
	for _, name := range []string{"a", "b", "c"} {
		if err := cms.Create(ctx, newCM(ns, name, name)); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, m)
	for _, sel := range []string{"metadata.name=b", "metadata.name!=b", "metadata.namespace=" + ns + ",metadata.name!=a", "metadata.namespace=other"} {
		opts := ListOptions{Namespace: ns, Fields: sel}
		want, err := cms.Uncached().List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []*corev1.ConfigMap
		eventually(t, "the cache to hold a, b and c", func() bool {
			all, err := cms.List(ctx, ListOptions{Namespace: ns})
			return err == nil && len(all) >= 3
		})
		if got, err = cms.List(ctx, opts); err != nil || storeNames(got) != storeNames(want) {
			t.Errorf("cached List(fields %q) = %s, %v; the server lists %s", sel, storeNames(got), err, storeNames(want))
		}
	}
	got, err := cms.List(ctx, ListOptions{Namespace: ns, Fields: "data.a=a"})
	if err == nil || !strings.Contains(err.Error(), "data.a has no index") {
		t.Errorf("cached List(fields data.a=a) = %s, %v; want an error naming data.a", storeNames(got), err)
	}
}

// benchCMs is n ConfigMaps over 100 namespaces, at resourceVersion rv,
// labelled app=a0..a19.
func benchCMs(n int, rv string) []*corev1.ConfigMap {
	out := make([]*corev1.ConfigMap, n)
	for k := range out {
		ns := fmt.Sprint("ns-", k%100)
		app := map[string]string{"app": fmt.Sprint("a", k%20)}
		out[k] = storeCM(ns, fmt.Sprint("cm-", k), rv, app)
	}
	return out
}

// A relist of 10,000 ConfigMaps, every one changed, into a store that
// holds them: put, the indexes and the sweep of the unlisted.
func BenchmarkStore_Replace_10k(b *testing.B) {
	s := newStore[*corev1.ConfigMap]()
	s.labelIndex("app")
	lists := [][]*corev1.ConfigMap{benchCMs(10000, "1"), benchCMs(10000, "2")}
	changed := func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {}
	s.replace("", lists[0], nil, changed)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		s.replace("", lists[n%2], nil, changed)
	}
}

// A cached List by label of 500 of 10,000 ConfigMaps, from its index.
func BenchmarkStore_ListByLabel_10k(b *testing.B) {
	s := newStore[*corev1.ConfigMap]()
	changed := func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {}
	s.replace("", benchCMs(10000, "1"), nil, changed)
	sel := labels.SelectorFromSet(labels.Set{"app": "a3"})
	storeList(s, "", sel)
	b.ReportAllocs()
	for b.Loop() {
		if got := storeList(s, "", sel); len(got) != 500 {
			b.Fatal(len(got))
		}
	}
}

// A cached List of one namespace (100 of 10,000 ConfigMaps) and of all,
// without selectors: the walks that test every object they read.
func BenchmarkStore_ListNamespace_10k(b *testing.B) {
	s := newStore[*corev1.ConfigMap]()
	changed := func(EventType, *corev1.ConfigMap, *corev1.ConfigMap) {}
	s.replace("", benchCMs(10000, "1"), nil, changed)
	b.ReportAllocs()
	for b.Loop() {
		if got := storeList(s, "ns-7", nil); len(got) != 100 {
			b.Fatal(len(got))
		}
		if got := storeList(s, "", nil); len(got) != 10000 {
			b.Fatal(len(got))
		}
	}
}

// A watch's MODIFIED event applied to an informer of 1,000 ConfigMaps:
// transform, share, put and the events to one handler.
func BenchmarkInformer_Apply(b *testing.B) {
	inf := &Informer[corev1.ConfigMap]{informer[*corev1.ConfigMap]{
		store:     newStore[*corev1.ConfigMap](),
		transform: func(*corev1.ConfigMap) {},
		sharer:    share.New((*corev1.ConfigMap)(nil)),
		log:       slog.New(slog.DiscardHandler),
	}}
	box := mailbox.New[event[*corev1.ConfigMap]]
	inf.handlers = []*handler[*corev1.ConfigMap]{{box: box()}}
	w := &watchState{synced: true}
	inf.watches = []*watchState{w}
	lists := [][]*corev1.ConfigMap{benchCMs(1000, "1"), benchCMs(1000, "2")}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		list := lists[n/1000%2]
		e := watchEvent[*corev1.ConfigMap]{Type: "MODIFIED", Object: list[n%1000]}
		if err := inf.apply(w, e); err != nil {
			b.Fatal(err)
		}
		if n%1000 == 0 {
			inf.handlers[0].box = box() // drop the events pushed
		}
	}
}

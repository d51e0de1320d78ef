package kctl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

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

package index

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

type key struct{ ns, name string }

type obj struct {
	key
	labels map[string]string
}

// tree is objects in namespaces x and y, named a..c, with app=<name>.
func tree(s *Set[key, *obj]) map[string]map[string]*obj {
	objs := map[string]map[string]*obj{}
	for _, ns := range []string{"x", "y"} {
		objs[ns] = map[string]*obj{}
		for _, name := range []string{"a", "b", "c"} {
			o := &obj{key{ns, name}, map[string]string{"app": name}}
			objs[ns][name] = o
			s.Add(o.key, o)
		}
	}
	return objs
}

func newTestSet() *Set[key, *obj] {
	return NewSet(
		func(o *obj) map[string]string { return o.labels },
		func(ns, name string) key { return key{ns, name} },
		func(k key) (string, string) { return k.ns, k.name },
	)
}

// Every plan (a name, a label index, a namespace, all, none) returns the
// objects that testing each against the selectors returns.
func TestList_EveryPlanAgreesWithAScan(t *testing.T) {
	s := newTestSet()
	objs := tree(s)
	for _, tc := range []struct{ ns, sel, fields string }{
		{"", "", ""}, {"x", "", ""}, {"", "app=b", ""}, {"y", "app in (a,c)", ""},
		{"", "", "metadata.name=c"}, {"x", "", "metadata.name=c"}, {"", "app!=a", "metadata.namespace!=x"},
		{"x", "", "metadata.namespace=y"}, {"", "", "metadata.namespace=y,metadata.name!=a"},
	} {
		sel, err := labels.Parse(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		fsel := fields.ParseSelectorOrDie(tc.fields)
		fs, unknown, err := s.Fields(tc.fields, "")
		if err != nil || unknown != nil {
			t.Fatal(err, unknown)
		}
		p, missing := s.Plan(tc.ns, sel, fs)
		for missing != "" {
			s.AddLabel(missing, func(yield func(key, *obj) bool) {
				for _, inner := range objs {
					for _, o := range inner {
						yield(o.key, o)
					}
				}
			})
			p, missing = s.Plan(tc.ns, sel, fs)
		}
		got := names(List(&p, objs, func(o *obj) *obj { return o }))
		var want []string
		for _, inner := range objs {
			for _, o := range inner {
				f := fields.Set{"metadata.namespace": o.ns, "metadata.name": o.name}
				in := tc.ns == "" || o.ns == tc.ns
				if in && sel.Matches(labels.Set(o.labels)) && fsel.Matches(f) {
					want = append(want, fmt.Sprint(o.key))
				}
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("List(%q, %q, %q) = %q, want %q", tc.ns, tc.sel, tc.fields, got, want)
		}
	}
}

func names(objs []*obj) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, fmt.Sprint(o.key))
	}
	slices.Sort(out)
	return out
}

// Presize makes the missing namespaces' maps, and keeps those there.
func TestPresize_MakesOnlyTheMissingMaps(t *testing.T) {
	kept := map[string]int{"a": 1}
	objs := map[string]map[string]int{"x": kept}
	list := []key{{"x", "a"}, {"y", "b"}, {"y", "c"}, {"", "d"}}
	Presize(objs, list, func(k key) string { return k.ns })
	if len(objs) != 3 || objs["y"] == nil || objs[""] == nil {
		t.Fatalf("Presize made %v, want maps of x, y and the cluster scope", objs)
	}
	if len(objs["x"]) != 1 || len(objs["y"]) != 0 {
		t.Errorf("Presize = %v: want x's map kept, y's empty", objs)
	}
}

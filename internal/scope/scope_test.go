package scope

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestNamespaces_SortedOnceEach_OrOneForAll(t *testing.T) {
	for _, c := range []struct {
		namespaced bool
		in, want   []string
	}{
		{true, []string{"b", "a", "b"}, []string{"a", "b"}},
		{true, nil, []string{""}},
		{true, []string{"a", ""}, []string{""}},
		{false, []string{"a"}, []string{""}},
	} {
		if got := Namespaces(c.namespaced, c.in); !slices.Equal(got, c.want) {
			t.Errorf("Namespaces(%v, %q) = %q, want %q", c.namespaced, c.in, got, c.want)
		}
	}
}

func TestTakes_NamespaceAndLabels_NeverAFieldSelector(t *testing.T) {
	obj := &metav1.ObjectMeta{Namespace: "a", Labels: map[string]string{"app": "web"}}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	db := labels.SelectorFromSet(labels.Set{"app": "db"})
	for _, c := range []struct {
		ns     string
		sel    labels.Selector
		fields string
		want   bool
	}{
		{"", nil, "", true},
		{"a", web, "", true},
		{"b", nil, "", false},
		{"a", db, "", false},
		{"a", nil, "spec.nodeName=n", false},
	} {
		if got := Takes(c.ns, c.sel, c.fields, obj); got != c.want {
			t.Errorf("Takes(%q, %v, %q) = %v, want %v", c.ns, c.sel, c.fields, got, c.want)
		}
	}
}

func TestNarrows_ANamespaceALabelOrAField(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, c := range []struct {
		namespaces []string
		sel        labels.Selector
		fields     string
		want       bool
	}{
		{nil, nil, "", false},
		{nil, labels.Everything(), "", false},
		{[]string{"a"}, nil, "", true},
		{nil, web, "", true},
		{nil, nil, "spec.nodeName=n", true},
	} {
		if got := Narrows(c.namespaces, c.sel, c.fields); got != c.want {
			t.Errorf("Narrows(%q, %v, %q) = %v, want %v", c.namespaces, c.sel, c.fields, got, c.want)
		}
	}
}

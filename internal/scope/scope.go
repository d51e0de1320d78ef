// Package scope says what a cache's scope lists and watches: the
// namespaces it watches one by one, and whether one list/watch takes in
// an object; and holds a cache's configuration of each type (PerType:
// scope, transform, resync period, metadata only).
package scope

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Namespaces returns the namespaces to list and watch, each on its own,
// sorted and without repeats, or [""] (one list/watch of all) for a
// cluster-scoped resource (not namespaced), no namespace, or "" among
// them.
func Namespaces(namespaced bool, namespaces []string) []string {
	sorted := slices.Sorted(slices.Values(namespaces))
	out := slices.Compact(sorted)
	all := !namespaced ||
		len(out) == 0 ||
		slices.Contains(out, "")
	if all {
		return []string{""}
	}
	return out
}

// Takes reports whether the list/watch of namespace ("" for all) with
// label selector sel (nil for any) and field selector fields takes in
// obj. With a field selector it reports false: only the server
// evaluates one.
func Takes(namespace string, sel labels.Selector, fields string, obj metav1.Object) bool {
	if fields != "" {
		return false
	}
	if namespace != "" && namespace != obj.GetNamespace() {
		return false
	}
	set := labels.Set(obj.GetLabels())
	return sel == nil || sel.Matches(set)
}

// Narrows reports whether a scope of namespaces, label selector sel
// (nil for any) and field selector fields holds fewer than every object
// of a type: whether it names a namespace, a label or a field.
func Narrows(namespaces []string, sel labels.Selector, fields string) bool {
	byNamespace := len(namespaces) > 0
	byLabels := sel != nil && !sel.Empty()
	byFields := fields != ""
	return byNamespace || byLabels || byFields
}

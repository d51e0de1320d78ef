// Package metachange names what changed between two versions of a
// Kubernetes object, from their metadata: the Detail of kctl's updated
// Trigger (Kinds), and the comparisons behind its GenerationChanged,
// LabelsChanged and AnnotationsChanged predicates.
package metachange

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Generation reports whether metadata.generation changed: the spec did.
func Generation(old, cur metav1.Object) bool {
	return old.GetGeneration() != cur.GetGeneration()
}

// Labels reports whether the labels changed.
func Labels(old, cur metav1.Object) bool {
	return !maps.Equal(old.GetLabels(), cur.GetLabels())
}

// Annotations reports whether the annotations changed.
func Annotations(old, cur metav1.Object) bool {
	return !maps.Equal(old.GetAnnotations(), cur.GetAnnotations())
}

// Kinds names the kinds of change between two versions of an object, in
// this order: spec, labels, annotations, finalizers, deleting (its
// deletion began); "status or other fields" if none of these changed.
func Kinds(old, cur metav1.Object) string {
	var kinds []string
	if Generation(old, cur) {
		kinds = append(kinds, "spec")
	}
	if Labels(old, cur) {
		kinds = append(kinds, "labels")
	}
	if Annotations(old, cur) {
		kinds = append(kinds, "annotations")
	}
	if !slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) {
		kinds = append(kinds, "finalizers")
	}
	wasLive := old.GetDeletionTimestamp() == nil
	isDeleting := cur.GetDeletionTimestamp() != nil
	if wasLive && isDeleting {
		kinds = append(kinds, "deleting")
	}
	if len(kinds) == 0 {
		kinds = append(kinds, "status or other fields")
	}
	return strings.Join(kinds, " ")
}

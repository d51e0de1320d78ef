package metachange

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKinds_NamesEachKindOfChangeInOrder(t *testing.T) {
	base := metav1.ObjectMeta{Generation: 1, Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"n": "x"}, Finalizers: []string{"f"}}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(m *metav1.ObjectMeta)
		want   string
	}{
		{"nothing", func(m *metav1.ObjectMeta) {}, "status or other fields"},
		{"spec", func(m *metav1.ObjectMeta) { m.Generation = 2 }, "spec"},
		{"labels", func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "2"} }, "labels"},
		{"annotations", func(m *metav1.ObjectMeta) { m.Annotations = nil }, "annotations"},
		{"finalizers", func(m *metav1.ObjectMeta) { m.Finalizers = nil }, "finalizers"},
		{"deleting", func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now }, "deleting"},
		{"all", func(m *metav1.ObjectMeta) {
			m.Generation = 3
			m.Labels = nil
			m.Annotations = map[string]string{"n": "y"}
			m.Finalizers = append(m.Finalizers, "g")
			m.DeletionTimestamp = &now
		}, "spec labels annotations finalizers deleting"},
	} {
		old := *base.DeepCopy()
		cur := *base.DeepCopy()
		tc.change(&cur)
		if got := Kinds(&old, &cur); got != tc.want {
			t.Errorf("%s: Kinds = %q, want %q", tc.name, got, tc.want)
		}
	}
	deleting := *base.DeepCopy()
	deleting.DeletionTimestamp = &now
	if got := Kinds(&deleting, &deleting); got != "status or other fields" {
		t.Errorf("an update of an object already deleting: Kinds = %q, want no deleting", got)
	}
}

func TestGenerationLabelsAnnotations_ReportTheirOwnChangeOnly(t *testing.T) {
	old := &metav1.ObjectMeta{Generation: 1, Labels: map[string]string{"a": "1"}}
	cur := &metav1.ObjectMeta{Generation: 1, Labels: map[string]string{"a": "2"}}
	if Generation(old, cur) || !Labels(old, cur) || Annotations(old, cur) {
		t.Errorf("a label change: Generation %v, Labels %v, Annotations %v; want only Labels",
			Generation(old, cur), Labels(old, cur), Annotations(old, cur))
	}
}

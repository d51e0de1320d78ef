package fieldlabel

import (
	"slices"
	"testing"
)

func TestServer(t *testing.T) {
	for _, tc := range []struct {
		group, kind, field string
		want               bool
	}{
		{"", "Pod", "spec.nodeName", true},
		{"", "Pod", "metadata.name", true},
		{"", "ConfigMap", "metadata.namespace", true},
		{"", "ConfigMap", "data.owner", false},
		{"", "Pod", "spec.containers", false},
		{"", "Secret", "type", true},
		{"apps", "Deployment", "spec.replicas", false},
		{"events.k8s.io", "Event", "regarding.name", true},
		{"events.k8s.io", "Event", "involvedObject.name", false},
		{"example.com", "Widget", "spec.size", false},
	} {
		if got := slices.Contains(Server(tc.group, tc.kind, nil), tc.field); got != tc.want {
			t.Errorf("Server(%q, %q) has %q: %v, want %v", tc.group, tc.kind, tc.field, got, tc.want)
		}
	}
}

func TestOf_IsSortedWithoutMetadata(t *testing.T) {
	for key, fields := range labels {
		if !slices.IsSorted(fields) {
			t.Errorf("%s: %v is not sorted", key, fields)
		}
		if slices.Contains(fields, "metadata.name") || slices.Contains(fields, "metadata.namespace") {
			t.Errorf("%s lists metadata fields, which every kind has", key)
		}
	}
}

func TestServer_AddsExtraOnce(t *testing.T) {
	got := Server("", "Secret", []string{"type", "data.tier", "data.tier"})
	want := []string{"metadata.name", "metadata.namespace", "type", "data.tier"}
	if !slices.Equal(got, want) {
		t.Errorf("Server(Secret, type and data.tier) = %v, want %v", got, want)
	}
}

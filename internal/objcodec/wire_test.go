package objcodec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWire_Accept(t *testing.T) {
	const pb, js = protowire.Media, MediaJSON
	meta := pb + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	metaList := pb + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	for _, tc := range []struct {
		name              string
		w                 Wire
		proto, watch, lst bool
		want              string
	}{
		{"json object", Wire{}, false, false, false, js},
		{"json list", Wire{}, false, false, true, js},
		{"json watch", Wire{}, false, true, true, js},
		{"protobuf object", Wire{}, true, false, false, pb + ", " + js},
		{"protobuf list", Wire{}, true, false, true, pb + ", " + js},
		{"protobuf watch", Wire{}, true, true, true, pb + ";stream=watch, " + js},
		{"metadata object", Metadata(), true, false, false, meta},
		{"metadata list", Metadata(), true, false, true, metaList},
		{"metadata watch", Metadata(), true, true, true, meta},
		{"metadata of a declared type", Metadata(), false, false, true, metaList},
	} {
		if got := tc.w.Accept(tc.proto, tc.watch, tc.lst); got != tc.want {
			t.Errorf("%s: Accept = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestWire_Object_UnwrapsTheEnvelopeOfTheKindAskedFor(t *testing.T) {
	body := protowire.Envelope("v1", "Pod", []byte("raw"))
	var w Wire
	raw, err := w.Object(body, "Pod")
	if err != nil || string(raw) != "raw" {
		t.Fatalf("Object = %q, %v; want raw", raw, err)
	}
	if _, err := w.Object(body, "Secret"); err == nil || !strings.Contains(err.Error(), "want a Secret") {
		t.Errorf("Object of another kind: err = %v, want one naming the kind wanted", err)
	}
	m := Metadata()
	if _, err := m.Object(body, "Pod"); err == nil {
		t.Error("metadata Wire took a Pod, want a PartialObjectMetadata")
	}
	meta := protowire.Envelope("meta.k8s.io/v1", MetadataKind, []byte("raw"))
	if raw, err := m.Object(meta, "Pod"); err != nil || string(raw) != "raw" {
		t.Errorf("metadata Object = %q, %v; want raw", raw, err)
	}
	if _, err := w.Object([]byte("not protobuf"), "Pod"); err == nil {
		t.Error("Object of a body without the envelope: no error")
	}
}

// podWithLimits is a pod with one container whose limits are cpu: 1.
func podWithLimits(t *testing.T, name string) []byte {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl",
			}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"),
				},
			},
		}}},
	}
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// decode decodes raw with w.
func decode(t *testing.T, w *Wire, raw []byte) *corev1.Pod {
	t.Helper()
	p := new(corev1.Pod)
	if err := w.Unmarshal(p, raw); err != nil {
		t.Fatal(err)
	}
	return p
}

// sameLimits reports whether a and b hold the same limits map.
func sameLimits(a, b *corev1.Pod) bool {
	la := a.Spec.Containers[0].Resources.Limits
	lb := b.Spec.Containers[0].Resources.Limits
	la[corev1.ResourceMemory] = resource.MustParse("1Mi")
	defer delete(la, corev1.ResourceMemory)
	_, ok := lb[corev1.ResourceMemory]
	return ok
}

func TestWire_Unmarshal_SharesMapsFromBeginToABookmark(t *testing.T) {
	a := podWithLimits(t, "a")
	b := podWithLimits(t, "b")
	w := WireOf(new(corev1.Pod), true)
	w.Begin()
	if sameLimits(decode(t, &w, a), decode(t, &w, b)) {
		t.Error("without Reuse, two pods share a map")
	}
	w.Reuse = true
	w.Begin()
	w.Event("ADDED")
	first := decode(t, &w, a)
	if !sameLimits(first, decode(t, &w, b)) {
		t.Error("with Reuse, after Begin: equal limits decoded twice, want shared")
	}
	list := w // a copy Begins on its own
	list.Begin()
	if sameLimits(first, decode(t, &list, b)) {
		t.Error("a copy that began anew shares the first copy's maps")
	}
	w.Event("BOOKMARK")
	if sameLimits(first, decode(t, &w, b)) {
		t.Error("after a BOOKMARK: a pod shares a map decoded before it")
	}
}

func TestWire_Unmarshal_SkipsManagedFieldsIfAsked(t *testing.T) {
	raw := podWithLimits(t, "a")
	w := WireOf(new(corev1.Pod), true)
	if p := decode(t, &w, raw); len(p.ManagedFields) != 1 || p.Name != "a" {
		t.Errorf("managedFields = %v, name %q; want kept, a", p.ManagedFields, p.Name)
	}
	w.SkipManagedFields = true
	if p := decode(t, &w, raw); p.ManagedFields != nil || p.Name != "a" {
		t.Errorf("skipping: managedFields = %v, name %q; want none, a", p.ManagedFields, p.Name)
	}
	var none Wire // no plan: the generated code alone
	if p := decode(t, &none, raw); len(p.Spec.Containers) != 1 {
		t.Errorf("without a plan: %d containers, want 1", len(p.Spec.Containers))
	}
	type plain struct{ Name string }
	if err := w.Unmarshal(&plain{}, raw); err == nil {
		t.Error("Unmarshal into a type without protobuf: no error")
	}
	if !bytes.Equal(raw, podWithLimits(t, "a")) {
		t.Error("Unmarshal changed its input")
	}
}

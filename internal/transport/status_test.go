package transport

import (
	"reflect"
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecodeStatus_ProtobufAndJSON(t *testing.T) {
	st := &metav1.Status{Status: "Failure", Code: 404, Reason: metav1.StatusReasonNotFound, Details: &metav1.StatusDetails{Name: "x", Kind: "pods"}}
	raw, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pb := protowire.Envelope("v1", "Status", raw)
	if got, ok := DecodeStatus(protowire.Media, pb); !ok || got.Code != 404 || got.Details.Name != "x" {
		t.Errorf("DecodeStatus(protobuf) = %+v, %v", got, ok)
	}
	if got, ok := DecodeStatus("application/json", []byte(`{"kind":"Status","code":409,"reason":"Conflict"}`)); !ok || got.Code != 409 {
		t.Errorf("DecodeStatus(json) = %+v, %v", got, ok)
	}
	for _, body := range []string{"404 page not found", `{"kind":"Pod"}`, "k8s\x00\xff"} {
		if _, ok := DecodeStatus("application/json", []byte(body)); ok {
			t.Errorf("DecodeStatus(%q) found a Status", body)
		}
		if _, ok := DecodeStatus(protowire.Media, []byte(body)); ok {
			t.Errorf("DecodeStatus(protobuf %q) found a Status", body)
		}
	}
}

func TestPermission_NamesRBACsVerbAndTheSubresource(t *testing.T) {
	for _, c := range []struct{ verb, sub, want string }{
		{"list", "", "list widgets"},
		{"update status of", "status", "update widgets/status"},
		{"apply", "", "patch widgets"},
		{"delete all of", "", "deletecollection widgets"},
	} {
		if got := Permission(c.verb, "widgets", c.sub); got != c.want {
			t.Errorf("Permission(%q, widgets, %q) = %q, want %q", c.verb, c.sub, got, c.want)
		}
	}
}

// ObjectMeta names an object whose body does not decode, from its
// metadata alone, JSON or protobuf (its own bytes, no envelope); it is
// zero when the metadata itself does not decode, or the body is cut short
// (which no decoder reads past, in either encoding).
func TestObjectMeta_OfAnObjectThatDoesNotDecode(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "7", UID: "u1"}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	whole, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := p.ObjectMeta.Marshal()
	// the metadata, then a spec (field 2) whose first field is cut short
	badSpec := protowire.AppendBytes(protowire.AppendBytes(nil, 1, meta), 2, []byte{0x0a, 0x09, 'c'})
	if err := new(corev1.Pod).Unmarshal(badSpec); err == nil {
		t.Fatal("a Pod with a spec cut short decodes")
	}
	badMeta := protowire.AppendBytes(nil, 1, []byte{0x0a, 0x09, 'p'})

	for _, tc := range []struct {
		what  string
		raw   string
		proto bool
		ns    string
		name  string // "": want the zero ObjectMeta
	}{
		{"JSON pod", `{"metadata":{"namespace":"ns","name":"p","resourceVersion":"7","uid":"u1"}}`, false, "ns", "p"},
		{"JSON spec not a Pod's", `{"metadata":{"namespace":"ns","name":"p","resourceVersion":"7","uid":"u1"},"spec":{"containers":5}}`, false, "ns", "p"},
		{"JSON spec before the metadata", `{"spec":{"containers":"x"},"metadata":{"namespace":"ns","name":"p","resourceVersion":"7","uid":"u1"}}`, false, "ns", "p"},
		{"JSON metadata not an ObjectMeta", `{"metadata":{"namespace":"ns","name":"p","labels":5}}`, false, "", ""},
		{"JSON without metadata", `{"spec":{}}`, false, "", ""},
		{"JSON cut short", `{"metadata":{"namespace":"ns","name":"p"},"spec":{`, false, "", ""},
		{"not JSON", `404 page not found`, false, "", ""},
		{"protobuf pod", string(whole), true, "ns", "p"},
		{"protobuf spec cut short", string(badSpec), true, "ns", "p"},
		{"protobuf metadata cut short", string(badMeta), true, "", ""},
		{"protobuf cut short", string(whole[:len(whole)-3]), true, "", ""},
		{"protobuf without metadata", string(protowire.AppendBytes(nil, 2, nil)), true, "", ""},
	} {
		m := ObjectMeta([]byte(tc.raw), tc.proto)
		if tc.name == "" {
			if !reflect.DeepEqual(m, metav1.ObjectMeta{}) {
				t.Errorf("%s: ObjectMeta = %+v, want zero", tc.what, m)
			}
			continue
		}
		if m.Namespace != tc.ns || m.Name != tc.name || m.ResourceVersion != "7" || m.UID != "u1" {
			t.Errorf("%s: ObjectMeta = %s/%s rv %q uid %q, want ns/p rv 7 uid u1", tc.what, m.Namespace, m.Name, m.ResourceVersion, m.UID)
		}
	}
}

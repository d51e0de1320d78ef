package transport

import (
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
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

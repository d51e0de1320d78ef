package pager

import (
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEarly_HandsOnAProtobufPagesListMetaOnly(t *testing.T) {
	lm := metav1.ListMeta{ResourceVersion: "7", Continue: "next"}
	raw, err := lm.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	page := protowire.Envelope("v1", "PodList", protowire.AppendBytes(nil, 1, raw))
	var got []metav1.ListMeta
	early := func(m metav1.ListMeta) { got = append(got, m) }
	Early(protowire.Media, page, early)
	if len(got) != 1 || got[0].Continue != "next" || got[0].ResourceVersion != "7" {
		t.Errorf("Early of a protobuf page handed on %+v, want its ListMeta once", got)
	}
	got = nil
	Early("application/json", []byte(`{"metadata":{"continue":"next"}}`), early)
	Early(protowire.Media, []byte("not an envelope"), early)
	if len(got) != 0 {
		t.Errorf("Early of a JSON page and of an undecodable one handed on %+v, want nothing", got)
	}
	Early(protowire.Media, page, nil) // no one to tell: no panic
}

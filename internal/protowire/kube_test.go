package protowire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// frame is a watch frame holding msg.
func frame(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
}

func TestList_GivesTheMetaAndEachItemInOrder(t *testing.T) {
	list := msg(str(1, "meta"), str(2, "a"), vint(3, 1), str(2, "b"))
	body := protowire.Envelope("v1", "PodList", list)
	var calls []string
	meta := func(v []byte) error {
		calls = append(calls, "meta "+string(v))
		return nil
	}
	item := func(v []byte) { calls = append(calls, "item "+string(v)) }
	err := protowire.List(body, meta, item)
	want := []string{"meta meta", "item a", "item b"}
	if err != nil || !slices.Equal(calls, want) {
		t.Errorf("List = %v, calling %q; want nil, calling %q", err, calls, want)
	}
	bad := errors.New("bad meta")
	failing := func([]byte) error { return bad }
	if err := protowire.List(body, failing, item); err != bad {
		t.Errorf("List with a failing meta = %v, want %v", err, bad)
	}
	truncated := body[:len(body)-1]
	if err := protowire.List(truncated, meta, item); err == nil {
		t.Errorf("List of a truncated body = nil, want an error")
	}
	if err := protowire.List(list, meta, item); err == nil {
		t.Errorf("List without the envelope = nil, want an error")
	}
}

func TestWithoutManagedFields_DecodesAllButField17OfField1(t *testing.T) {
	meta := msg(str(1, "name"), str(17, "managed"), str(3, "ns"))
	object := msg(str(1, string(meta)), str(2, "spec"))
	var runs, metaRuns [][]byte
	decode := func(b []byte) error {
		runs = append(runs, b)
		return nil
	}
	decodeMeta := func(b []byte) error {
		metaRuns = append(metaRuns, b)
		return nil
	}
	err := protowire.WithoutManagedFields(object, decode, decodeMeta)
	got := string(bytes.Join(metaRuns, nil))
	if err != nil || got != string(msg(str(1, "name"), str(3, "ns"))) {
		t.Errorf("WithoutManagedFields = %v, the metadata decoded %q; want nil, all but managedFields", err, got)
	}
	if string(bytes.Join(runs, nil)) != string(str(2, "spec")) {
		t.Errorf("the object decoded %q, want its spec alone", runs)
	}
	m, err := protowire.Metadata(object)
	if err != nil || !bytes.Equal(m, meta) {
		t.Errorf("Metadata = %q, %v; want %q", m, err, meta)
	}
}

func TestWatchFrames_ReadEachEventThenEOF(t *testing.T) {
	obj := protowire.Envelope("v1", "Pod", []byte("pod"))
	event := msg(str(1, "ADDED"), str(2, string(str(1, string(obj)))))
	stream := bytes.NewReader(append(frame(event), frame(event)...))
	var buf bytes.Buffer
	for i := range 2 {
		n, err := protowire.FrameSize(stream)
		if err != nil {
			t.Fatalf("frame %d: FrameSize = %v", i, err)
		}
		f, err := protowire.ReadFrame(stream, n, &buf)
		if err != nil {
			t.Fatalf("frame %d: ReadFrame = %v", i, err)
		}
		typ, o, err := protowire.WatchEvent(f)
		if err != nil || string(typ) != "ADDED" || !bytes.Equal(o, obj) {
			t.Errorf("frame %d: WatchEvent = %q, %q, %v; want ADDED and the object", i, typ, o, err)
		}
	}
	if _, err := protowire.FrameSize(stream); err != io.EOF {
		t.Errorf("FrameSize at the end = %v, want io.EOF", err)
	}
}

func TestWatchFrames_TooLargeOrTruncated_Errs(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, protowire.MaxFrame+1)
	_, err := protowire.FrameSize(bytes.NewReader(huge))
	if err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("FrameSize of a huge frame = %v, want an error naming the limit", err)
	}
	short := bytes.NewReader(frame([]byte("abcdef"))[:7])
	n, err := protowire.FrameSize(short)
	if err != nil {
		t.Fatal(err)
	}
	_, err = protowire.ReadFrame(short, n, &bytes.Buffer{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadFrame of a truncated frame = %v, want io.ErrUnexpectedEOF", err)
	}
	if _, _, err := protowire.WatchEvent([]byte("\x0a\x05ab")); err == nil {
		t.Errorf("WatchEvent of a malformed frame = nil, want an error")
	}
}

func TestObject_OfAnotherKind_Errs(t *testing.T) {
	body := protowire.Envelope("v1", "Pod", str(1, "meta"))
	raw, err := protowire.Object(body, "Pod")
	if err != nil || string(raw) != string(str(1, "meta")) {
		t.Errorf("Object(a Pod, Pod) = %q, %v", raw, err)
	}
	_, err = protowire.Object(body, "ConfigMap")
	if err == nil || !strings.Contains(err.Error(), "the server sent a Pod, want a ConfigMap") {
		t.Errorf("Object(a Pod, ConfigMap) = %v, want an error naming both kinds", err)
	}
}

func TestListMetaAndObjectMeta_DecodeTheMetadataAlone(t *testing.T) {
	lm := metav1.ListMeta{ResourceVersion: "7", Continue: "next"}
	lmRaw, _ := lm.Marshal()
	list := protowire.Envelope("v1", "PodList", msg(protowire.AppendBytes(nil, 1, lmRaw), str(2, "garbage item")))
	got, ok := protowire.ListMeta(list)
	if !ok || got.ResourceVersion != "7" || got.Continue != "next" {
		t.Errorf("ListMeta = %+v, %v", got, ok)
	}
	if _, ok := protowire.ListMeta([]byte("{}")); ok {
		t.Error("ListMeta of JSON is ok")
	}
	om := metav1.ObjectMeta{Namespace: "ns", Name: "a"}
	omRaw, _ := om.Marshal()
	m, err := protowire.ObjectMeta(msg(protowire.AppendBytes(nil, 1, omRaw), str(2, "\xff")))
	if err != nil || m.Namespace != "ns" || m.Name != "a" {
		t.Errorf("ObjectMeta = %+v, %v", m, err)
	}
}

type panicky struct{}

func (panicky) Unmarshal([]byte) error { panic("boom") }

func TestSafeUnmarshal_APanicIsAnError(t *testing.T) {
	err := protowire.SafeUnmarshal(panicky{}, nil)
	if err == nil || !strings.Contains(err.Error(), "decoder panic: boom") {
		t.Errorf("SafeUnmarshal of a panicking decoder = %v", err)
	}
}

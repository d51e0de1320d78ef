package kctl

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// events reads w to its end.
func readEvents[P any](w *watchStream[P]) ([]watchEvent[P], error) {
	var out []watchEvent[P]
	for {
		ev, err := w.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestCodec_ProtobufWatch_BadObjectIsAnEventAndTheStreamGoesOn(t *testing.T) {
	bad := envelope("Pod", badPodProto("shop", "broken"))
	var stream []byte
	stream = append(stream, watchFrame("ADDED", podProto(realisticPod(1)))...)
	stream = append(stream, watchFrame("MODIFIED", bad)...)
	stream = append(stream, watchFrame("BOOKMARK", podProto(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77"}}))...)
	stream = append(stream, watchFrame("ERROR", statusProto(&metav1.Status{Status: "Failure", Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}))...)
	evs, err := readEvents(newWatchStream(podCodec(), mediaProtobuf+";stream=watch", io.NopCloser(bytes.NewReader(stream))))
	if err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
	if len(evs) != 4 {
		t.Fatalf("got %d events, want 4", len(evs))
	}
	if evs[0].Type != "ADDED" || evs[0].Err != nil || evs[0].Object.Name != realisticPod(1).Name || evs[0].Object.Kind != "Pod" {
		t.Errorf("event 0 = %s %v %v, want ADDED of %s", evs[0].Type, evs[0].Err, evs[0].Object, realisticPod(1).Name)
	}
	if evs[1].Type != "MODIFIED" || evs[1].Err == nil || !strings.Contains(evs[1].Err.Error(), "shop/broken") {
		t.Errorf("event 1 = %s, err %v; want MODIFIED with an error naming shop/broken", evs[1].Type, evs[1].Err)
	}
	if evs[2].Type != "BOOKMARK" || evs[2].Object.ResourceVersion != "77" {
		t.Errorf("event 2 = %s %v, want BOOKMARK at 77", evs[2].Type, evs[2].Object)
	}
	if evs[3].Type != "ERROR" || evs[3].Status == nil || evs[3].Status.Code != 410 {
		t.Errorf("event 3 = %s %v, want ERROR with status 410", evs[3].Type, evs[3].Status)
	}
}

func TestCodec_ProtobufWatch_TruncatedFrameEndsTheStreamWithAnError(t *testing.T) {
	frame := watchFrame("ADDED", podProto(realisticPod(1)))
	for _, cut := range []int{2, 4, len(frame) - 1} {
		w := newWatchStream(podCodec(), mediaProtobuf, io.NopCloser(bytes.NewReader(append(append([]byte{}, frame...), frame[:cut]...))))
		evs, err := readEvents(w)
		if len(evs) != 1 || err == nil || err == io.EOF || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %d events, err %v; want 1 event and an unexpected-EOF error", cut, len(evs), err)
		}
	}
	huge := binary.BigEndian.AppendUint32(nil, 1<<31)
	if _, err := newWatchStream(podCodec(), mediaProtobuf, io.NopCloser(bytes.NewReader(huge))).Next(); err == nil || err == io.EOF {
		t.Errorf("a 2 GiB frame header: err = %v, want an error", err)
	}
}

func TestCodec_JSONWatch_BadObjectIsAnEvent_GarbageEndsTheStream(t *testing.T) {
	stream := `{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"n"},"spec":{"size":3}}}
{"type":"MODIFIED","object":{"metadata":{"name":"b","namespace":"n"},"spec":{"size":"three"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"}}
{"type":"DELETED","object":{"metadata":{"na`
	evs, err := readEvents(newWatchStream(gizmoCodec(), mediaJSON, io.NopCloser(strings.NewReader(stream))))
	if len(evs) != 3 || err == nil || err == io.EOF {
		t.Fatalf("got %d events, err %v; want 3 events and an error for the truncated one", len(evs), err)
	}
	if evs[0].Object == nil || evs[0].Object.Spec.Size != 3 || evs[0].Object.Kind != "Gizmo" || evs[0].Object.APIVersion != "kctl.example.com/v1" {
		t.Errorf("event 0 = %+v, want the gizmo n/a of size 3 with its TypeMeta", evs[0].Object)
	}
	if evs[1].Err == nil || !strings.Contains(evs[1].Err.Error(), "n/b") {
		t.Errorf("event 1 err = %v, want one naming n/b", evs[1].Err)
	}
	if evs[2].Status == nil || evs[2].Status.Code != 410 {
		t.Errorf("event 2 = %+v, want an ERROR with status 410", evs[2])
	}
}

// Events of every size, big and small in turn, decode in order, the
// protobuf ones through pooled buffers and the JSON ones through a decoder
// made again after each big event (its buffer only grows).
func TestCodec_WatchOfBigAndSmallEvents_DecodesEveryOne(t *testing.T) {
	sizes := []int{10, 100 << 10, 5, 40 << 10, 1 << 10, 200 << 10, 0}
	pod := func(i, size int) *corev1.Pod {
		p := realisticPod(i)
		p.Annotations = map[string]string{"pad": strings.Repeat("p", size)}
		return p
	}
	var protoStream, jsonStream bytes.Buffer
	for i, size := range sizes {
		protoStream.Write(watchFrame("MODIFIED", podProto(pod(i, size))))
		b, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": pod(i, size)})
		if err != nil {
			t.Fatal(err)
		}
		jsonStream.Write(append(b, '\n'))
	}
	for _, c := range []struct {
		ct     string
		stream []byte
	}{{mediaProtobuf, protoStream.Bytes()}, {mediaJSON, jsonStream.Bytes()}} {
		evs, err := readEvents(newWatchStream(podCodec(), c.ct, io.NopCloser(bytes.NewReader(c.stream))))
		if err != io.EOF || len(evs) != len(sizes) {
			t.Fatalf("%s: %d events and %v, want %d and io.EOF", c.ct, len(evs), err, len(sizes))
		}
		for i, ev := range evs {
			want := pod(i, sizes[i])
			if ev.Err != nil || ev.Object.Name != want.Name || ev.Object.Annotations["pad"] != want.Annotations["pad"] {
				t.Errorf("%s: event %d: err %v, not the pod with %d bytes of annotation", c.ct, i, ev.Err, sizes[i])
			}
		}
	}
}

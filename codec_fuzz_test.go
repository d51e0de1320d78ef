package kctl

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fuzz targets: whatever the server sends, the decoders return an error or
// objects, and never panic. Seeds are in testdata/fuzz.

func FuzzDecodeProtobufList(f *testing.F) {
	pb, _ := podListBodies(2)
	f.Add(pb)
	c := podCodec()
	f.Fuzz(func(t *testing.T, body []byte) {
		items, _, _, err := c.decodeList(mediaProtobuf, body)
		if err == nil {
			for _, p := range items {
				if p == nil {
					t.Fatal("nil item without an error")
				}
			}
		}
		_, _ = c.decode(mediaProtobuf, body)
		_, _ = decodeStatus(mediaProtobuf, body)
	})
}

// FuzzSkipManagedFields checks that skipping managedFields decodes whatever
// a full decode does, less the managedFields.
func FuzzSkipManagedFields(f *testing.F) {
	f.Add(rawPodForFuzz(1))
	full, skip := podCodec(), podCodec()
	skip.skipManagedFields = true
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := full.decodeItem(raw, true)
		got, skipErr := skip.decodeItem(raw, true)
		if err != nil {
			return // skipping may decode what a full decode cannot: broken managedFields
		}
		if want.ManagedFields = nil; skipErr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("skipping managedFields: %v\n got %+v\nwant %+v", skipErr, got, want)
		}
	})
}

func rawPodForFuzz(i int) []byte { raw, _ := realisticPod(i).Marshal(); return raw }

func FuzzDecodeJSONList(f *testing.F) {
	f.Add([]byte(`{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"},"spec":{"size":1}}]}`))
	c := gizmoCodec()
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, _, _ = c.decodeList(mediaJSON, body)
		_, _ = c.decode(mediaJSON, body)
		_, _ = decodeStatus(mediaJSON, body)
	})
}

func FuzzDecodeProtobufWatch(f *testing.F) {
	f.Add(append(watchFrame("ADDED", podProto(realisticPod(1))), watchFrame("ERROR", statusProto(&metav1.Status{Code: 410}))...))
	c := podCodec()
	f.Fuzz(func(t *testing.T, stream []byte) {
		w := newWatchStream(c, mediaProtobuf, io.NopCloser(bytes.NewReader(stream)))
		for range 1000 {
			ev, err := w.Next()
			if err != nil {
				return
			}
			if ev.Err == nil && ev.Object == nil && ev.Status == nil {
				t.Fatalf("event %s has neither object, status nor error", ev.Type)
			}
		}
	})
}

func FuzzDecodeJSONWatch(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":"a"}}}{"type":"ERROR","object":{"kind":"Status","code":410}}`))
	c := gizmoCodec()
	f.Fuzz(func(t *testing.T, stream []byte) {
		w := newWatchStream(c, mediaJSON, io.NopCloser(bytes.NewReader(stream)))
		for range 1000 {
			ev, err := w.Next()
			if err != nil {
				return
			}
			if ev.Err == nil && ev.Object == nil && ev.Status == nil {
				t.Fatalf("event %s has neither object, status nor error", ev.Type)
			}
		}
	})
}

package kctl

import (
	"bytes"
	"encoding/json"
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
	f.Add([]byte(`{"metadata":{},"items":[{"metadata":{"name":"a"},"spec":{"size":"x"}},null,{"metadata":{"name":"b"}}]}`))
	c := gizmoCodec()
	f.Fuzz(func(t *testing.T, body []byte) {
		items, meta, skipped, err := c.decodeList(mediaJSON, body)
		wantItems, wantMeta, wantSkipped, wantErr := decodeJSONListByHand(body)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decodeList error = %v, encoding/json's = %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if len(skipped) != wantSkipped {
			t.Fatalf("decodeList skipped %d items, encoding/json fails on %d", len(skipped), wantSkipped)
		}
		if !reflect.DeepEqual(meta, wantMeta) {
			t.Fatalf("decodeList metadata = %+v, encoding/json's = %+v", meta, wantMeta)
		}
		for _, obj := range items {
			c.setTypeMeta(obj) // what decodeList must have set too
		}
		for _, obj := range wantItems {
			c.setTypeMeta(obj)
		}
		if len(items) != len(wantItems) {
			t.Fatalf("decodeList gave %d items, encoding/json %d", len(items), len(wantItems))
		}
		for i := range items {
			if !reflect.DeepEqual(items[i], wantItems[i]) {
				t.Fatalf("item %d: decodeList = %+v, encoding/json = %+v", i, items[i], wantItems[i])
			}
		}
		_, _ = c.decode(mediaJSON, body)
		_, _ = decodeStatus(mediaJSON, body)
	})
}

// decodeJSONListByHand is what decodeList must return for a JSON list, by
// encoding/json alone: the list's metadata and each item that decodes into
// a gizmo on its own, in order, with the number of items that do not.
func decodeJSONListByHand(body []byte) (items []*gizmo, meta metav1.ListMeta, skipped int, err error) {
	var list struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	err = json.Unmarshal(body, &list)
	if err != nil {
		return nil, metav1.ListMeta{}, 0, err
	}
	for _, raw := range list.Items {
		obj := new(gizmo)
		itemErr := json.Unmarshal(raw, obj)
		if itemErr != nil {
			skipped++
			continue
		}
		items = append(items, obj)
	}
	return items, list.Metadata, skipped, nil
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

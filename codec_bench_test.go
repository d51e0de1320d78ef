package kctl

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// BenchmarkDecodePodList compares decoding a page of 500 realistic pods from
// protobuf (with managedFields, and skipping them as the cache does) and from
// JSON (the same page, as the API server sends either).
func BenchmarkDecodePodList(b *testing.B) {
	pb, js := podListBodies(500)
	for _, bc := range []struct {
		name, ct string
		body     []byte
		skip     bool
	}{{"protobuf", mediaProtobuf, pb, false}, {"protobuf-skipManagedFields", mediaProtobuf, pb, true}, {"json", mediaJSON, js, false}} {
		b.Run(bc.name, func(b *testing.B) {
			c := podCodec()
			c.skipManagedFields = bc.skip
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if items, _, _, err := c.decodeList(bc.ct, bc.body); err != nil || len(items) != 500 {
					b.Fatal(len(items), err)
				}
			}
		})
	}
}

// BenchmarkDecodePodWatch decodes 500 MODIFIED events of realistic pods,
// with managedFields and skipping them as the cache does.
func BenchmarkDecodePodWatch(b *testing.B) {
	var stream []byte
	for i := range 500 {
		stream = append(stream, watchFrame("MODIFIED", podProto(realisticPod(i)))...)
	}
	for _, skip := range []bool{false, true} {
		b.Run(map[bool]string{false: "protobuf", true: "protobuf-skipManagedFields"}[skip], func(b *testing.B) {
			c := podCodec()
			c.skipManagedFields = skip
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				w := newWatchStream(c, mediaProtobuf, io.NopCloser(bytes.NewReader(stream)))
				for range 500 {
					if ev, err := w.Next(); err != nil || ev.Err != nil {
						b.Fatal(err, ev.Err)
					}
				}
			}
		})
	}
}

// BenchmarkListPods is one List of a page of 500 realistic pods from an
// httptest server, as protobuf without a Content-Length (as the API server
// streams lists): reading the body and decoding it, as a Client does and as
// the cache does (skipping managedFields).
func BenchmarkListPods(b *testing.B) {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "4242"}}
	for i := range 500 {
		list.Items = append(list.Items, *realisticPod(i))
	}
	raw, _ := list.Marshal()
	pb := envelope("PodList", raw)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", mediaProtobuf)
		w.Write(pb)
	}))
	defer srv.Close()
	conn, err := NewConn(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	for _, skip := range []bool{false, true} {
		b.Run(map[bool]string{false: "client", true: "cache"}[skip], func(b *testing.B) {
			pods := NewClient[corev1.Pod](conn)
			pods.codec.skipManagedFields = skip
			b.SetBytes(int64(len(pb)))
			b.ReportAllocs()
			for b.Loop() {
				if items, err := pods.List(b.Context(), ListOptions{}); err != nil || len(items) != 500 {
					b.Fatal(len(items), err)
				}
			}
		})
	}
}

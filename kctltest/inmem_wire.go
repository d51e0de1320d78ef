package kctltest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/kctl-dev/kctl/internal/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The wire formats, as the API server's: JSON for every resource; protobuf
// ("k8s\x00" and a runtime.Unknown holding the object) for k8s.io/api
// types when the client asks for it first; objects as
// PartialObjectMetadata when the Accept header says as=PartialObjectMetadata.
const (
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	mediaJSON     = "application/json"
)

// protoMessage is what every k8s.io/api type's pointer has.
type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// decodeBody turns a request body into JSON: protobuf of a k8s.io/api
// type, YAML of an apply, or JSON.
func decodeBody(contentType string, b []byte, res *memResource) ([]byte, error) {
	switch {
	case strings.HasPrefix(contentType, mediaProtobuf):
		if res.typ == nil {
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
				Reason: metav1.StatusReasonUnsupportedMediaType, Message: "the body of a custom resource cannot be " + contentType}}
		}
		_, raw, err := protowire.Unwrap(b)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		obj := reflect.New(res.typ).Interface()
		if err := obj.(protoMessage).Unmarshal(raw); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return json.Marshal(obj)
	case strings.HasPrefix(contentType, "application/apply-patch+yaml"):
		js, err := utilyaml.ToJSON(b)
		if err != nil {
			return nil, apierrors.NewBadRequest("the applied configuration is not YAML: " + err.Error())
		}
		return js, nil
	}
	return b, nil
}

// encoding is how an answer travels, from the request's Accept header.
type encoding struct {
	proto    bool // protobuf, for a k8s.io/api type
	metadata bool // objects as PartialObjectMetadata
	memo     *encodeMemo
}

// encodingOf is how r asks for its answer; memo remembers what was
// encoded (nil: nothing is).
func encodingOf(r *http.Request, res *memResource, memo *encodeMemo) encoding {
	accept := r.Header.Get("Accept")
	first, _, _ := strings.Cut(accept, ",")
	e := encoding{metadata: strings.Contains(first, "as=PartialObjectMetadata"), memo: memo}
	e.proto = strings.HasPrefix(first, mediaProtobuf) && (res.typ != nil || e.metadata)
	return e
}

func (e encoding) contentType() string {
	if e.proto {
		return mediaProtobuf
	}
	return mediaJSON
}

// encodeMemo remembers the encodings of stored objects that are not
// their stored JSON (protobuf, PartialObjectMetadata), by the stored JSON
// itself: an object is encoded once, not once for each answer, list and
// watch that carries it. It forgets everything when it holds memoSize.
// It is safe for concurrent use; the encodings it returns are shared,
// and must not be modified.
type encodeMemo struct {
	mu sync.Mutex
	m  map[memoKey][]byte
}

// memoKey is one stored object (obj, its JSON) encoded as e says for res.
type memoKey struct {
	res             *memResource
	proto, metadata bool
	obj             string
}

// memoSize bounds an encodeMemo: more objects than most tests make, in
// at most tens of megabytes (objects of a few kilobytes, twice).
const memoSize = 4096

// object encodes a stored object (JSON) as e says. The result may be
// shared: do not modify it.
func (e encoding) object(res *memResource, b []byte) ([]byte, error) {
	if !e.metadata && !e.proto {
		return b, nil
	}
	if e.memo == nil {
		return e.encode(res, b)
	}
	e.memo.mu.Lock()
	out, ok := e.memo.m[memoKey{res, e.proto, e.metadata, string(b)}]
	e.memo.mu.Unlock()
	if ok {
		return out, nil
	}
	out, err := e.encode(res, b)
	if err != nil {
		return nil, err
	}
	e.memo.mu.Lock()
	defer e.memo.mu.Unlock()
	if e.memo.m == nil || len(e.memo.m) >= memoSize {
		e.memo.m = map[memoKey][]byte{}
	}
	e.memo.m[memoKey{res, e.proto, e.metadata, string(b)}] = out
	return out, nil
}

// encode is object without the memo.
func (e encoding) encode(res *memResource, b []byte) ([]byte, error) {
	if e.metadata {
		var m struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		if !e.proto {
			return json.Marshal(map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": m.Metadata})
		}
		var meta metav1.PartialObjectMetadata
		if err := json.Unmarshal(m.Metadata, &meta.ObjectMeta); err != nil {
			return nil, err
		}
		pb, err := meta.Marshal()
		return protowire.Envelope("meta.k8s.io/v1", "PartialObjectMetadata", pb), err
	}
	obj := reflect.New(res.typ).Interface()
	if err := json.Unmarshal(b, obj); err != nil {
		return nil, err
	}
	pb, err := obj.(protoMessage).Marshal()
	return protowire.Envelope(res.res.APIVersion(), res.res.Kind, pb), err
}

// list encodes a list of stored objects with its ListMeta.
func (e encoding) list(res *memResource, meta metav1.ListMeta, items [][]byte) ([]byte, error) {
	apiVersion := res.res.APIVersion()
	kind := res.res.Kind + "List"
	if e.metadata {
		apiVersion = "meta.k8s.io/v1"
		kind = "PartialObjectMetadataList"
	}
	encoded := make([][]byte, len(items))
	for i, b := range items {
		var err error
		encoded[i], err = e.object(res, b)
		if err != nil {
			return nil, err
		}
		if e.proto {
			_, encoded[i], _ = protowire.Unwrap(encoded[i]) // items are not enveloped
		}
	}
	if !e.proto {
		// Written out, not marshalled: json.Marshal would check and compact
		// each item, which json.Marshal made.
		head, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta})
		if err != nil {
			return nil, err
		}
		size := len(head) + len(`,"items":[]`)
		for _, b := range encoded {
			size += len(b) + 1
		}
		out := make([]byte, 0, size)
		out = append(out, head[:len(head)-1]...)
		out = append(out, `,"items":[`...)
		for i, b := range encoded {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, b...)
		}
		return append(out, "]}"...), nil
	}
	mb, err := meta.Marshal()
	if err != nil {
		return nil, err
	}
	body := protowire.AppendBytes(nil, 1, mb)
	for _, b := range encoded {
		body = protowire.AppendBytes(body, 2, b)
	}
	return protowire.Envelope(apiVersion, kind, body), nil
}

// event encodes one watch event: a JSON line, or a protobuf frame (a
// 4-byte big-endian length and a metav1.WatchEvent).
func (e encoding) event(res *memResource, typ string, obj []byte) ([]byte, error) {
	if typ != "ERROR" {
		var err error
		obj, err = e.object(res, obj)
		if err != nil {
			return nil, err
		}
	}
	if !e.proto {
		out := make([]byte, 0, len(obj)+len(`{"type":"","object":}`)+len(typ)+1)
		out = append(out, `{"type":"`...)
		out = append(out, typ...)
		out = append(out, `","object":`...)
		out = append(out, obj...)
		return append(out, "}\n"...), nil
	}
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: obj}}
	pb, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(pb))), pb...), nil
}

// status encodes a watch's ERROR event's object, a metav1.Status.
func (e encoding) status(st metav1.Status) []byte {
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if !e.proto {
		b, _ := json.Marshal(st)
		return b
	}
	pb, _ := st.Marshal()
	return protowire.Envelope("v1", "Status", pb)
}

// bookmark is a BOOKMARK event's object at resourceVersion rv: only its
// kind and resourceVersion, and the annotation that ends a watch-list's
// initial events if end.
func bookmark(res *memResource, rv int64, end bool) []byte {
	meta := map[string]any{"resourceVersion": fmt.Sprint(rv)}
	if end {
		meta["annotations"] = map[string]any{metav1.InitialEventsAnnotationKey: "true"}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": res.res.APIVersion(), "kind": res.res.Kind, "metadata": meta})
	return b
}

package kctltest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

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
}

func encodingOf(r *http.Request, res *memResource) encoding {
	accept := r.Header.Get("Accept")
	first, _, _ := strings.Cut(accept, ",")
	e := encoding{metadata: strings.Contains(first, "as=PartialObjectMetadata")}
	e.proto = strings.HasPrefix(first, mediaProtobuf) && (res.typ != nil || e.metadata)
	return e
}

func (e encoding) contentType() string {
	if e.proto {
		return mediaProtobuf
	}
	return mediaJSON
}

// object encodes a stored object (JSON) as e says.
func (e encoding) object(res *memResource, b []byte) ([]byte, error) {
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
	if !e.proto {
		return b, nil
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
		raw := make([]json.RawMessage, len(encoded))
		for i, b := range encoded {
			raw[i] = b
		}
		return json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta, "items": raw})
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
		b, err := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(obj)})
		return append(b, '\n'), err
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

// Package objcodec holds the mechanics of kctl's codec that need no
// kctl type: an object encoded as a request body (JSON, or protobuf in
// its envelope), a list answer's items decoded one by one, so that one
// object that does not decode loses only itself, not the list, and a
// resource's Wire (wire.go): the media type its requests ask for (its
// objects whole, or their metadata alone) and how its protobuf is
// decoded (out of the envelope, slices sized once, around managedFields
// if asked, equal maps shared by read-only objects decoded together).
package objcodec

import (
	"encoding/json"
	"slices"

	"github.com/kctl-dev/kctl/internal/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MediaJSON is the media type of JSON.
const MediaJSON = "application/json"

// Encode is obj as a request body and its Content-Type: JSON, or if
// proto, protobuf (obj is a protowire.Message) in the envelope that
// names apiVersion and kind.
func Encode(
	obj any,
	proto bool,
	apiVersion, kind string,
) (body []byte, contentType string, err error) {
	if !proto {
		body, err = json.Marshal(obj)
		return body, MediaJSON, err
	}
	body, err = obj.(protowire.Message).Marshal()
	if err != nil {
		return nil, "", err
	}
	body = protowire.Envelope(apiVersion, kind, body)
	return body, protowire.Media, nil
}

// jsonList is a JSON list with items of type I.
type jsonList[I any] struct {
	Metadata metav1.ListMeta `json:"metadata"`
	Items    []I             `json:"items"`
}

// List decodes body, a list answer of Content-Type contentType, into
// individually allocated items of type P (a pointer). item decodes one
// item's own bytes, protobuf if proto, else JSON. A JSON list is decoded
// in one pass first, then each of its items is given to done (which
// sets what the pass does not, an object's apiVersion and kind); after
// any error, or if an item is null, it is decoded again item by item. An
// item that fails to decode is left out and its error added to skipped;
// err means the body does not decode as a list at all (a JSON object
// without items, such as {} or null, reads as an empty list: callers
// decode only a successful answer).
func List[P any](
	contentType string,
	body []byte,
	item func(raw []byte, proto bool) (P, error),
	done func(P),
) (items []P, meta metav1.ListMeta, skipped []error, err error) {
	add := func(raw []byte, proto bool) {
		obj, err := item(raw, proto)
		if err != nil {
			skipped = append(skipped, err)
		} else {
			items = append(items, obj)
		}
	}
	if !protowire.IsProtobuf(contentType) {
		// one pass; after any error, item by item
		var fast jsonList[P]
		fastErr := json.Unmarshal(body, &fast)
		hasNil := slices.ContainsFunc(fast.Items, IsNil[P])
		if fastErr == nil && !hasNil {
			for _, obj := range fast.Items {
				done(obj)
			}
			return fast.Items, fast.Metadata, nil, nil
		}
		var list jsonList[json.RawMessage]
		err = json.Unmarshal(body, &list)
		for _, raw := range list.Items {
			add(raw, false)
		}
		meta = list.Metadata
	} else {
		decodeMeta := func(v []byte) error {
			return protowire.SafeUnmarshal(&meta, v)
		}
		addItem := func(v []byte) { add(v, true) }
		err = protowire.List(body, decodeMeta, addItem)
	}
	return items, meta, skipped, err
}

// IsNil reports whether obj, a pointer, is nil.
func IsNil[P any](obj P) bool {
	var none P
	return any(obj) == any(none)
}

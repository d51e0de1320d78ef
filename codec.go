package kctl

// Codecs: how objects travel and are decoded, whole or as their metadata
// only, one by one, as a list or as a watch's events; and typeOps, what
// the core needs of T itself. Built-in (k8s.io/api) types travel as
// protobuf, declared types as JSON; internal/objcodec encodes an object,
// splits a list into its items, and holds the protobuf specifics (Wire:
// the media type asked for, the envelope, slices sized once, maps shared).

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/objcodec"
	"github.com/kctl-dev/kctl/internal/objcopy"
	"github.com/kctl-dev/kctl/internal/protowire"
	"github.com/kctl-dev/kctl/internal/transport"
	"github.com/kctl-dev/kctl/internal/undecodable"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mediaJSON is the media type of declared types' objects and of delete
// options; built-in types' is protobuf's (protowire.Media).
const mediaJSON = objcodec.MediaJSON

// typeOps is the work on P = *T that needs T itself. The core (codec,
// watch stream, store, informer, client, cached reads) is generic over P
// alone, constrained by any: Go compiles a generic function once per GC
// shape of its type arguments, and every pointer is one shape when the
// constraint has methods only (one naming *T, as Object[T] does, makes
// each T a shape of its own). So the core is compiled once for every T,
// and reaches T only through typeOps, metav1.Object (metaOf) and type
// assertions: work that needs T goes here. The typed entry points
// (NewClient, InformerFor...) stay thin; opsOf, compiled per T, is small.
type typeOps[P any] struct {
	// name is T's, e.g. "v1.Pod" (typeName).
	name string
	// newObject is new(T).
	newObject func() P
	// set is *dst = *src.
	set func(dst, src P)
}

// opsOf returns T's typeOps.
func opsOf[T any]() *typeOps[*T] {
	return &typeOps[*T]{
		name:      typeName[T](),
		newObject: func() *T { return new(T) },
		set:       func(dst, src *T) { *dst = *src },
	}
}

// deepCopy returns a copy of obj that shares no memory with it
// (internal/objcopy): by DeepCopyInto if *T has one, else by a JSON round
// trip, which a CRD struct must survive (written there; NewClient checks
// it). Every copy kctl hands out (cached reads, reconciles) is made so.
// It panics if the round trip fails for one value (a MarshalJSON that
// fails); a reconcile recovers such a panic as an error.
func (o *typeOps[P]) deepCopy(obj P) P { return objcopy.Deep(obj, o.newObject) }

// isNil reports whether obj, a pointer, is nil.
func isNil[P any](obj P) bool { return objcodec.IsNil(obj) }

// codec encodes and decodes one resource's objects, of type P = *T (see
// typeOps); it is immutable.
type codec[P any] struct {
	// ops is the work on P that needs T itself.
	ops        *typeOps[P]
	res        Resource
	apiVersion string
	// builtin: a k8s.io/api type: strategic merge patch works.
	builtin bool
	// proto: a built-in with protobuf support: sent and asked for as
	// protobuf.
	proto bool
	// wire: the media type asked for and protobuf's decoding; the cache
	// sets its SkipManagedFields and Reuse (objcodec.Wire).
	wire objcodec.Wire
}

// newCodec is the codec of res's objects, of type P; builtin: res is a
// k8s.io/api type's.
func newCodec[P any](
	ops *typeOps[P],
	res Resource,
	builtin bool,
) codec[P] {
	obj := any(ops.newObject())
	_, ok := obj.(protowire.Message) // *T, T a k8s.io/api type
	proto := ok && builtin
	return codec[P]{
		ops:        ops,
		res:        res,
		apiVersion: res.APIVersion(),
		builtin:    builtin,
		proto:      proto,
		wire:       objcodec.WireOf(obj, proto),
	}
}

// accept is the Accept header of a request, of a list (a list read), or
// of a watch.
func (c codec[P]) accept(watch, list bool) string {
	return c.wire.Accept(c.proto, watch, list)
}

// setTypeMeta fills obj's apiVersion and kind, which protobuf does not
// carry (internal/apitype).
func (c codec[P]) setTypeMeta(obj P) {
	apitype.SetTypeMeta(obj, c.apiVersion, c.res.Kind)
}

// encode sets obj's apiVersion and kind and returns it as a request body
// (internal/objcodec: JSON, or protobuf in its envelope).
func (c codec[P]) encode(
	obj P,
) (body []byte, contentType string, err error) {
	c.setTypeMeta(obj)
	body, contentType, err = objcodec.Encode(
		obj, c.proto, c.apiVersion, c.res.Kind)
	if err != nil {
		key := keyOf(metaOf(obj))
		return nil, "", fmt.Errorf(
			"kctl: encoding %s %s: %w", c.res, key, err)
	}
	return body, contentType, nil
}

// decode decodes one object from a response body (or a watch event), by
// its content type: JSON as it is, protobuf out of its envelope.
func (c codec[P]) decode(contentType string, body []byte) (P, error) {
	if !protowire.IsProtobuf(contentType) {
		return c.decodeItem(body, false)
	}
	raw, err := c.wire.Object(body, c.res.Kind)
	if err != nil {
		var none P
		return none, fmt.Errorf(
			"kctl: decoding %s: %w", c.res, err)
	}
	return c.decodeItem(raw, true)
}

// decodeError is the error of an object that does not decode into T: it
// names the object, and carries its key (Namespace, Name) if its metadata
// decodes alone (internal/undecodable).
type decodeError = undecodable.Error

// decodeItem decodes one object's own bytes (no envelope), never panicking.
// Its error is a *decodeError, naming the object if its metadata decodes.
func (c codec[P]) decodeItem(raw []byte, proto bool) (obj P, err error) {
	obj = c.ops.newObject()
	defer func() {
		if err != nil {
			var none P
			obj = none
			res := c.res.String()
			err = undecodable.Decoding(raw, proto, res, err)
		}
	}()
	defer protowire.Recovered(&err)
	if proto {
		// slices sized once, maps shared, maybe around managedFields
		err = c.wire.Unmarshal(obj, raw)
	} else {
		err = json.Unmarshal(raw, obj)
	}
	c.setTypeMeta(obj)
	return obj, err
}

// decodeList decodes a list into individually allocated objects
// (internal/objcodec: a JSON list in one pass if it can, each item by
// decodeItem). An item that fails to decode is left out and its error
// added to skipped; err means the body is not a list at all.
func (c codec[P]) decodeList(
	contentType string,
	body []byte,
) (items []P, meta metav1.ListMeta, skipped []error, err error) {
	c.wire.Begin() // maps shared by this list's items
	items, meta, skipped, err = objcodec.List(
		contentType, body, c.decodeItem, c.setTypeMeta)
	if err != nil {
		err = fmt.Errorf("kctl: decoding a list of %s: %w", c.res, err)
		return nil, metav1.ListMeta{}, nil, err
	}
	return items, meta, skipped, nil
}

// The watch stream: one watch response read event by event (its bytes,
// and its events, by internal/transport: Stream), each object decoded
// into P (*T) by the codec above.

// watchEvent is one decoded watch event (internal/transport's Event:
// Type, Object, the Status of an ERROR, Err of an object that failed to
// decode).
type watchEvent[P any] = transport.Event[P]

// watchStream reads one watch response (transport.Stream): Next returns
// the next event, an error ending the stream (io.EOF: closed cleanly);
// Close may be called concurrently with Next (it unblocks Next); Next is
// not for concurrent use.
type watchStream[P any] = transport.Stream[P]

// newWatchStream reads body, a watch's answer, decoding its objects with
// c: a bookmark ends the maps shared since the stream began
// (objcodec.Wire.Event).
func newWatchStream[P any](
	c codec[P],
	contentType string,
	body io.ReadCloser,
) *watchStream[P] {
	c.wire.Begin() // maps shared until the first bookmark
	decode := func(typ string, object []byte) (P, error) {
		c.wire.Event(typ)
		return c.decode(contentType, object)
	}
	return transport.NewStream(contentType, body, c.res.String(), decode)
}

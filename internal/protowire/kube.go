package protowire

// The Kubernetes messages kctl decodes from the wire pieces of
// protowire.go, with their generated code: an answer's Status, a list's
// ListMeta, an object's metadata, and an object decoded around its
// managedFields. A panic of generated code is returned as an error.

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Media is the media type of the API server's protobuf.
const Media = "application/vnd.kubernetes.protobuf"

// IsProtobuf reports whether contentType is protobuf's (Media).
func IsProtobuf(contentType string) bool {
	return strings.HasPrefix(contentType, Media)
}

// Message is implemented by *T for every k8s.io/api type T.
type Message interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// Recovered, deferred, turns a decoder's panic into *err.
func Recovered(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("decoder panic: %v", r)
	}
}

// SafeUnmarshal is m.Unmarshal(b) that turns a panic into an error.
func SafeUnmarshal(m interface{ Unmarshal([]byte) error }, b []byte) (err error) {
	defer Recovered(&err)
	return m.Unmarshal(b)
}

// Object returns the object's own bytes in body, an enveloped object,
// and an error if body is malformed or of another kind than want.
func Object(body []byte, want string) ([]byte, error) {
	kind, raw, err := Unwrap(body)
	otherKind := len(kind) > 0 && string(kind) != want
	if err == nil && otherKind {
		err = fmt.Errorf("the server sent a %s, want a %s",
			kind, want)
	}
	return raw, err
}

// Status returns the metav1.Status in body (never nil), and whether body
// is one.
func Status(body []byte) (*metav1.Status, bool) {
	st := new(metav1.Status)
	kind, raw, err := Unwrap(body)
	isStatus := err == nil && string(kind) == "Status"
	return st, isStatus && SafeUnmarshal(st, raw) == nil
}

// ListMeta reads the ListMeta of body, an enveloped list, without
// decoding its items (its field 1); ok is false if it does not decode.
func ListMeta(body []byte) (meta metav1.ListMeta, ok bool) {
	_, raw, err := Unwrap(body)
	if err != nil {
		return meta, false
	}
	m, err := Field(raw, listMeta)
	if err != nil {
		return meta, false
	}
	return meta, SafeUnmarshal(&meta, m) == nil
}

// ObjectMeta decodes the metadata of raw, an object's own bytes, alone.
func ObjectMeta(raw []byte) (metav1.ObjectMeta, error) {
	var m metav1.ObjectMeta
	b, fieldErr := Metadata(raw)
	unmarshalErr := SafeUnmarshal(&m, b)
	return m, errors.Join(fieldErr, unmarshalErr)
}

// Unmarshal decodes raw, an object's own bytes, into obj with decode
// (generated code, or a faster equivalent). With skipManagedFields, obj's
// metadata.managedFields are skipped: the runs around them are decoded.
func Unmarshal(
	obj any,
	raw []byte,
	skipManagedFields bool,
	decode func([]byte) error,
) error {
	var meta *metav1.ObjectMeta
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if ok && skipManagedFields {
		meta, _ = acc.GetObjectMeta().(*metav1.ObjectMeta)
	}
	if meta == nil {
		return decode(raw)
	}
	return WithoutManagedFields(raw, decode, meta.Unmarshal)
}

// Package protowire reads and writes the few protobuf wire-format pieces
// kctl handles by hand, without generated code: the "k8s\x00" envelope of
// the API server's protobuf answers (a runtime.Unknown), length-delimited
// fields, a list's items, decoding a message around one of its fields
// (an object around its managedFields), and a watch's frames (watch.go).
// Values it returns alias the input: nothing is copied. kube.go decodes
// the Kubernetes messages kctl reads from these pieces (Status, ListMeta,
// ObjectMeta) with their generated code.
package protowire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Magic starts every protobuf body of the API server.
var Magic = []byte("k8s\x00")

// Field numbers every k8s.io/api type shares: an object's metadata (a
// metav1.ObjectMeta) is its field 1, and managedFields is field 17 of
// ObjectMeta. A list's ListMeta is its field 1, each item field 2.
const (
	objectMeta    = 1
	managedFields = 17
	listMeta      = 1
	listItem      = 2
)

// Wire types of protobuf fields.
const (
	varint  = 0
	fixed64 = 1
	bytesT  = 2
	fixed32 = 5
)

// AppendBytes appends field f, length-delimited with value v, to b.
func AppendBytes(b []byte, f int, v []byte) []byte {
	tag := uint64(f)<<3 | bytesT
	b = binary.AppendUvarint(b, tag)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Envelope is body (a runtime.Unknown) wrapped in Magic, with the given
// apiVersion and kind.
func Envelope(apiVersion, kind string, body []byte) []byte {
	typeMeta := AppendBytes(nil, 1, []byte(apiVersion))
	typeMeta = AppendBytes(typeMeta, 2, []byte(kind))
	out := bytes.Clone(Magic)
	out = AppendBytes(out, 1, typeMeta)
	return AppendBytes(out, 2, body)
}

// Unwrap parses the envelope: the kind and the raw object alias body,
// which runtime.Unknown.Unmarshal would copy whole.
func Unwrap(body []byte) (kind, raw []byte, err error) {
	u, ok := bytes.CutPrefix(body, Magic)
	if !ok {
		n := len(body)
		err = fmt.Errorf("protobuf body without the k8s envelope (%d bytes)", n)
		return nil, nil, err
	}
	typeMeta, err := Field(u, 1) // apiVersion 1, kind 2
	if err == nil {
		kind, err = Field(typeMeta, 2)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bad protobuf envelope: %w", err)
	}
	raw, _ = Field(u, 2)
	return kind, raw, nil
}

// Field returns the value of the last length-delimited field num of
// message b (nil if none), and an error if b is malformed.
func Field(b []byte, num int) (val []byte, err error) {
	for len(b) > 0 {
		f, wire, v, rest, err := Next(b)
		if err != nil {
			return val, err
		}
		if f == num && wire == bytesT {
			val = v
		}
		b = rest
	}
	return val, nil
}

// Next splits the first field off message b: its number, its wire type,
// its value (of a length-delimited field) and the fields after it.
func Next(b []byte) (num int, wire byte, val, rest []byte, err error) {
	tag, n := binary.Uvarint(b)
	num = int(tag >> 3)
	wire = byte(tag & 7)
	b = b[max(n, 0):]
	size := uint64(0)
	m := 1
	switch wire {
	case varint:
		_, m = binary.Uvarint(b)
		size = uint64(max(m, 0))
	case fixed64:
		size = 8
	case fixed32:
		size = 4
	case bytesT:
		size, m = binary.Uvarint(b)
		b = b[max(m, 0):]
	default:
		m = 0
	}
	bad := n <= 0 || m <= 0 || num == 0
	bad = bad || tag>>3 >= 1<<29 || size > uint64(len(b))
	if bad {
		err = fmt.Errorf("malformed or truncated protobuf field %d "+
			"(wire type %d)", tag>>3, wire)
		return 0, 0, nil, nil, err
	}
	if wire == bytesT {
		val = b[:size]
	}
	return num, wire, val, b[size:], nil
}

// DecodeAround calls decode on each run of message b's fields between the
// length-delimited occurrences of field skip, and inner on their values.
// A malformed message is left for decode to report.
func DecodeAround(b []byte, skip int, decode, inner func([]byte) error) error {
	run := b
	rest := b
	for len(rest) > 0 {
		f, wire, val, next, err := Next(rest)
		if err != nil {
			break
		}
		if f == skip && wire == bytesT {
			before := run[:len(run)-len(rest)]
			err := errors.Join(decode(before), inner(val))
			if err != nil {
				return err
			}
			run = next
		}
		rest = next
	}
	return decode(run)
}

// Metadata returns the metadata (a metav1.ObjectMeta) of raw, an
// object's own bytes (no envelope): nil if none.
func Metadata(raw []byte) ([]byte, error) {
	return Field(raw, objectMeta)
}

// WithoutManagedFields decodes raw, an object's own bytes, skipping its
// metadata's managedFields: decode gets the runs of the object's fields
// around its metadata, decodeMeta those of the metadata around
// managedFields. Generated Unmarshal methods merge, so decoding runs one
// after the other decodes the whole but what is skipped.
func WithoutManagedFields(
	raw []byte,
	decode, decodeMeta func([]byte) error,
) error {
	ignore := func([]byte) error { return nil }
	inner := func(m []byte) error {
		return DecodeAround(m, managedFields, decodeMeta, ignore)
	}
	return DecodeAround(raw, objectMeta, decode, inner)
}

// List walks body, an enveloped list: meta gets its ListMeta, item each
// item's own bytes, in order. An error of meta, or a malformed body, ends
// the walk and is returned.
func List(body []byte, meta func([]byte) error, item func([]byte)) error {
	_, b, err := Unwrap(body)
	for err == nil && len(b) > 0 {
		var f int
		var wire byte
		var v []byte
		f, wire, v, b, err = Next(b)
		switch {
		case err != nil || wire != bytesT:
		case f == listMeta:
			err = meta(v)
		case f == listItem:
			item(v)
		}
	}
	return err
}

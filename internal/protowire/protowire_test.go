package protowire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
)

// Wire types, as the protobuf encoding spec numbers them.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// maxField is the largest valid protobuf field number.
const maxField = 1<<29 - 1

// tag is the encoded key of field f with wire type w.
func tag(f int, w byte) []byte {
	return binary.AppendUvarint(nil, uint64(f)<<3|uint64(w))
}

// msg concatenates encoded fields into a message.
func msg(fields ...[]byte) []byte {
	return bytes.Join(fields, nil)
}

// str is field f, length-delimited with value s.
func str(f int, s string) []byte {
	return protowire.AppendBytes(nil, f, []byte(s))
}

// vint is field f, a varint of value v.
func vint(f int, v uint64) []byte {
	return binary.AppendUvarint(tag(f, wireVarint), v)
}

// sameMemory reports whether a lies inside b's memory (a aliases b).
func sameMemory(a, b []byte) bool {
	for i := range b {
		if len(a) > 0 && &b[i] == &a[0] {
			return i+len(a) <= len(b)
		}
	}
	return false
}

func TestAppendBytes_ThenNext_ReadsTheFieldBack(t *testing.T) {
	long := strings.Repeat("x", 300) // its length takes two varint bytes
	for _, f := range []int{1, 15, 16, 2047, 2048, maxField} {
		for _, v := range []string{"", "a", long} {
			prefix := []byte("prefix")
			b := protowire.AppendBytes(prefix, f, []byte(v))
			if !bytes.HasPrefix(b, prefix) {
				t.Fatalf("AppendBytes(%q, %d, %d bytes) = %q, lost the prefix", prefix, f, len(v), b)
			}
			num, wire, val, rest, err := protowire.Next(b[len(prefix):])
			if err != nil || num != f || wire != wireBytes || string(val) != v || len(rest) != 0 {
				t.Errorf("Next(AppendBytes(nil, %d, %d bytes)) = %d, %d, %d bytes, %q, %v, want %d, 2, %d bytes, \"\", nil",
					f, len(v), num, wire, len(val), rest, err, f, len(v))
			}
		}
	}
}

func TestEnvelope_ThenUnwrap_RoundTripsKindAndRaw(t *testing.T) {
	tests := []struct {
		apiVersion, kind string
		body             []byte
	}{
		{"v1", "Pod", []byte("\x0a\x03pod")},
		{"apps/v1", "Deployment", []byte{}},
		{"example.com/v1alpha1", "Widget", bytes.Repeat([]byte{0xff}, 200)},
		{"", "", []byte("x")},
	}
	for _, tt := range tests {
		env := protowire.Envelope(tt.apiVersion, tt.kind, tt.body)
		if !bytes.HasPrefix(env, protowire.Magic) {
			t.Errorf("Envelope(%q, %q, ...) = %q, want it to start with %q",
				tt.apiVersion, tt.kind, env, protowire.Magic)
		}
		kind, raw, err := protowire.Unwrap(env)
		if err != nil || string(kind) != tt.kind || !bytes.Equal(raw, tt.body) {
			t.Errorf("Unwrap(Envelope(%q, %q, %q)) = %q, %q, %v, want %q, %q, nil",
				tt.apiVersion, tt.kind, tt.body, kind, raw, err, tt.kind, tt.body)
		}
	}
}

func TestUnwrap_AliasesTheBody(t *testing.T) {
	env := protowire.Envelope("v1", "Pod", []byte("object"))
	kind, raw, err := protowire.Unwrap(env)
	if err != nil {
		t.Fatalf("Unwrap(Envelope(\"v1\", \"Pod\", \"object\")) = _, _, %v", err)
	}
	if !sameMemory(kind, env) || !sameMemory(raw, env) {
		t.Errorf("Unwrap(env) = %q, %q, copies; want both to alias env", kind, raw)
	}
}

func TestUnwrap_WithoutMagic_Errs(t *testing.T) {
	env := protowire.Envelope("v1", "Pod", []byte("object"))
	tests := [][]byte{
		nil,
		[]byte("k8s"),
		[]byte(`{"kind":"Pod"}`),
		append([]byte("k8s\x01"), env[len(protowire.Magic):]...),
		env[1:],
		env[len(protowire.Magic):],
	}
	for _, body := range tests {
		kind, raw, err := protowire.Unwrap(body)
		if err == nil || !strings.Contains(err.Error(), "envelope") {
			t.Errorf("Unwrap(%q) = %q, %q, %v, want an error about the envelope", body, kind, raw, err)
		}
	}
}

func TestUnwrap_MalformedEnvelope_Errs(t *testing.T) {
	magic := string(protowire.Magic)
	tests := []string{
		magic + "\x0a\x05ab",            // TypeMeta longer than the body
		magic + "\x0a",                  // TypeMeta without a length
		magic + "\x00\x00",              // field number 0
		magic + "\x0a\x02\x12\x05",      // kind longer than TypeMeta
		magic + "\x0a\x01\xff",          // TypeMeta holds a truncated tag
		magic + "\x0a\x03\x0a\x01v\x0f", // wire type 7 after the envelope's TypeMeta
	}
	for _, body := range tests {
		kind, raw, err := protowire.Unwrap([]byte(body))
		if err == nil || !strings.Contains(err.Error(), "bad protobuf envelope") {
			t.Errorf("Unwrap(%q) = %q, %q, %v, want a bad-envelope error", body, kind, raw, err)
		}
	}
}

func TestField_ReturnsTheLastOccurrence(t *testing.T) {
	b := msg(str(1, "first"), str(2, "other"), vint(3, 7), str(1, "last"), vint(4, 1))
	got, err := protowire.Field(b, 1)
	if err != nil || string(got) != "last" {
		t.Errorf("Field(%q, 1) = %q, %v, want \"last\", nil", b, got, err)
	}
	if !sameMemory(got, b) {
		t.Errorf("Field(%q, 1) = %q, a copy; want it to alias the message", b, got)
	}
}

func TestField_Absent_ReturnsNil(t *testing.T) {
	tests := []struct {
		b   []byte
		num int
	}{
		{nil, 1},
		{[]byte{}, 1},
		{msg(str(2, "other")), 1},
		// Only length-delimited occurrences count.
		{msg(vint(1, 5)), 1},
		{msg(tag(1, wireFixed32), []byte("1234")), 1},
		{msg(tag(1, wireFixed64), []byte("12345678")), 1},
	}
	for _, tt := range tests {
		got, err := protowire.Field(tt.b, tt.num)
		if err != nil || got != nil {
			t.Errorf("Field(%q, %d) = %q, %v, want nil, nil", tt.b, tt.num, got, err)
		}
	}
}

func TestField_PresentButEmpty_IsNotNil(t *testing.T) {
	b := str(1, "")
	got, err := protowire.Field(b, 1)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("Field(%q, 1) = %#v, %v, want an empty non-nil value, nil", b, got, err)
	}
}

func TestField_Malformed_Errs(t *testing.T) {
	tests := [][]byte{
		msg(str(1, "ok"), []byte("\x0a\x05ab")),
		msg(str(1, "ok"), []byte{0x80}),
		[]byte{0x00},
	}
	for _, b := range tests {
		if got, err := protowire.Field(b, 1); err == nil {
			t.Errorf("Field(%q, 1) = %q, nil, want an error", b, got)
		}
	}
}

func TestNext_SplitsOffEachWireType(t *testing.T) {
	after := str(9, "after")
	tests := []struct {
		name    string
		field   []byte
		num     int
		wire    byte
		wantVal []byte
	}{
		{"varint", vint(1, 150), 1, wireVarint, nil},
		{"varint 0", vint(2, 0), 2, wireVarint, nil},
		{"max varint", vint(3, 1<<64-1), 3, wireVarint, nil},
		{"fixed64", msg(tag(4, wireFixed64), []byte("8 bytes!")), 4, wireFixed64, nil},
		{"fixed32", msg(tag(5, wireFixed32), []byte("4byt")), 5, wireFixed32, nil},
		{"bytes", str(6, "abc"), 6, wireBytes, []byte("abc")},
		{"empty bytes", str(7, ""), 7, wireBytes, []byte{}},
		{"two-byte tag", str(16, "x"), 16, wireBytes, []byte("x")},
		{"max field number", vint(maxField, 1), maxField, wireVarint, nil},
	}
	for _, tt := range tests {
		b := msg(tt.field, after)
		num, wire, val, rest, err := protowire.Next(b)
		if err != nil || num != tt.num || wire != tt.wire ||
			!bytes.Equal(val, tt.wantVal) || (val == nil) != (tt.wantVal == nil) ||
			!bytes.Equal(rest, after) {
			t.Errorf("%s: Next(%q) = %d, %d, %q, %q, %v, want %d, %d, %q, %q, nil",
				tt.name, b, num, wire, val, rest, err, tt.num, tt.wire, tt.wantVal, after)
		}
	}
}

func TestNext_RejectsMalformedFields(t *testing.T) {
	overflow := bytes.Repeat([]byte{0xff}, 10)
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated tag", []byte{0x80}},
		{"overlong tag", append(slices.Clone(overflow), 0x01)},
		{"field number 0, varint", []byte{0x00, 0x00}},
		{"field number 0, bytes", []byte{0x02, 0x00}},
		{"field number too large", vint(maxField+2, 1)},
		{"truncated varint", []byte{0x08, 0x80}},
		{"missing varint", []byte{0x08}},
		{"overlong varint", append([]byte{0x08}, overflow...)},
		{"truncated fixed64", msg(tag(1, wireFixed64), []byte("7 bytes"))},
		{"truncated fixed32", msg(tag(1, wireFixed32), []byte("3by"))},
		{"missing length", []byte{0x0a}},
		{"truncated length", []byte{0x0a, 0x80}},
		{"length past the end", []byte("\x0a\x05abcd")},
		{"huge length", append([]byte{0x0a}, binary.AppendUvarint(nil, 1<<63)...)},
		{"start group", msg(tag(1, 3), []byte{0x00})},
		{"end group", msg(tag(1, 4), []byte{0x00})},
		{"wire type 6", msg(tag(1, 6), []byte{0x00})},
		{"wire type 7", msg(tag(1, 7), []byte{0x00})},
	}
	for _, tt := range tests {
		num, wire, val, rest, err := protowire.Next(tt.b)
		if err == nil {
			t.Errorf("%s: Next(%q) = %d, %d, %q, %q, nil, want an error",
				tt.name, tt.b, num, wire, val, rest)
		}
	}
}

// recorder records the calls DecodeAround makes, failing those given.
type recorder struct {
	calls []string
	fail  map[string]error
}

func (r *recorder) decode(b []byte) error { return r.record("decode", b) }
func (r *recorder) inner(b []byte) error  { return r.record("inner", b) }

func (r *recorder) record(fn string, b []byte) error {
	call := fmt.Sprintf("%s(%q)", fn, b)
	r.calls = append(r.calls, call)
	return r.fail[call]
}

// call is the record of fn called on b.
func call(fn string, b []byte) string { return fmt.Sprintf("%s(%q)", fn, b) }

func TestDecodeAround_DecodesTheRunsAndInnerTheSkippedValues(t *testing.T) {
	a, b, c := str(2, "a"), vint(3, 7), str(4, "c")
	x, y := str(1, "X"), str(1, "Y")
	tests := []struct {
		name string
		msg  []byte
		want []string
	}{
		{"no skipped field", msg(a, b),
			[]string{call("decode", msg(a, b))}},
		{"empty message", nil,
			[]string{call("decode", nil)}},
		{"between runs", msg(a, x, b, c, y, c),
			[]string{call("decode", a), call("inner", []byte("X")),
				call("decode", msg(b, c)), call("inner", []byte("Y")),
				call("decode", c)}},
		{"first and last, so runs are empty", msg(x, y),
			[]string{call("decode", nil), call("inner", []byte("X")),
				call("decode", nil), call("inner", []byte("Y")),
				call("decode", nil)}},
		{"not length-delimited, so not skipped", msg(a, vint(1, 5), c),
			[]string{call("decode", msg(a, vint(1, 5), c))}},
	}
	for _, tt := range tests {
		rec := &recorder{}
		err := protowire.DecodeAround(tt.msg, 1, rec.decode, rec.inner)
		if err != nil || !slices.Equal(rec.calls, tt.want) {
			t.Errorf("%s: DecodeAround(%q, 1, decode, inner) = %v, calling\n\t%q\nwant nil, calling\n\t%q",
				tt.name, tt.msg, err, rec.calls, tt.want)
		}
	}
}

func TestDecodeAround_Malformed_HandsTheRestToDecode(t *testing.T) {
	a, x := str(2, "a"), str(1, "X")
	bad := []byte("\x0a\x05ab")
	tests := []struct {
		name string
		msg  []byte
		want []string
	}{
		{"malformed at once", bad,
			[]string{call("decode", bad)}},
		{"malformed after a field", msg(a, bad),
			[]string{call("decode", msg(a, bad))}},
		{"malformed after a skipped field", msg(a, x, a, bad),
			[]string{call("decode", a), call("inner", []byte("X")),
				call("decode", msg(a, bad))}},
	}
	for _, tt := range tests {
		rec := &recorder{}
		err := protowire.DecodeAround(tt.msg, 1, rec.decode, rec.inner)
		if err != nil || !slices.Equal(rec.calls, tt.want) {
			t.Errorf("%s: DecodeAround(%q, 1, decode, inner) = %v, calling\n\t%q\nwant nil, calling\n\t%q",
				tt.name, tt.msg, err, rec.calls, tt.want)
		}
	}
}

func TestDecodeAround_AnError_StopsAndIsReturned(t *testing.T) {
	a, c, d := str(2, "a"), str(4, "c"), str(5, "d")
	x, y := str(1, "X"), str(1, "Y")
	m := msg(a, x, c, y, d)
	errDecode := errors.New("decode failed")
	errInner := errors.New("inner failed")
	tests := []struct {
		name string
		fail map[string]error
		want []string
	}{
		{"decode fails", map[string]error{call("decode", c): errDecode},
			[]string{call("decode", a), call("inner", []byte("X")),
				call("decode", c), call("inner", []byte("Y"))}},
		{"inner fails", map[string]error{call("inner", []byte("X")): errInner},
			[]string{call("decode", a), call("inner", []byte("X"))}},
		{"first decode fails", map[string]error{call("decode", a): errDecode},
			[]string{call("decode", a), call("inner", []byte("X"))}},
		{"last decode fails", map[string]error{call("decode", d): errDecode},
			[]string{call("decode", a), call("inner", []byte("X")),
				call("decode", c), call("inner", []byte("Y")), call("decode", d)}},
	}
	for _, tt := range tests {
		rec := &recorder{fail: tt.fail}
		err := protowire.DecodeAround(m, 1, rec.decode, rec.inner)
		for _, want := range tt.fail {
			if !errors.Is(err, want) {
				t.Errorf("%s: DecodeAround(%q, 1, decode, inner) = %v, want %v", tt.name, m, err, want)
			}
		}
		if !slices.Equal(rec.calls, tt.want) {
			t.Errorf("%s: DecodeAround(%q, 1, decode, inner) called\n\t%q\nwant\n\t%q",
				tt.name, m, rec.calls, tt.want)
		}
	}
}

func TestDecodeAround_BothFailing_ReturnsBothErrors(t *testing.T) {
	a, x := str(2, "a"), str(1, "X")
	errDecode := errors.New("decode failed")
	errInner := errors.New("inner failed")
	rec := &recorder{fail: map[string]error{
		call("decode", a):          errDecode,
		call("inner", []byte("X")): errInner,
	}}
	m := msg(a, x)
	err := protowire.DecodeAround(m, 1, rec.decode, rec.inner)
	if !errors.Is(err, errDecode) || !errors.Is(err, errInner) {
		t.Errorf("DecodeAround(%q, 1, decode, inner) = %v, want both %v and %v", m, err, errDecode, errInner)
	}
}

// FuzzNext checks that Next never panics, that on success it consumes a
// non-empty prefix of a valid field and its value lies in that prefix, and
// that on failure it returns nothing but the error.
func FuzzNext(f *testing.F) {
	f.Add([]byte{})
	f.Add(vint(1, 150))
	f.Add(msg(tag(2, wireFixed64), []byte("8 bytes!")))
	f.Add(msg(tag(3, wireFixed32), []byte("4byt")))
	f.Add(str(4, "abc"))
	f.Add(protowire.Envelope("v1", "Pod", str(1, "meta")))
	f.Add([]byte("\x0a\x05ab"))
	f.Add(msg(tag(1, 3), []byte{0x00}))
	f.Add(vint(maxField, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		num, wire, val, rest, err := protowire.Next(b)
		if err != nil {
			if num != 0 || wire != 0 || val != nil || rest != nil {
				t.Fatalf("Next(%q) = %d, %d, %q, %q, %v, want zeros with the error",
					b, num, wire, val, rest, err)
			}
			return
		}
		if len(rest) >= len(b) || !bytes.HasSuffix(b, rest) ||
			(len(rest) > 0 && &rest[0] != &b[len(b)-len(rest)]) {
			t.Fatalf("Next(%q) rest = %q, want a proper suffix of the input", b, rest)
		}
		if num < 1 {
			t.Fatalf("Next(%q) num = %d, want at least 1", b, num)
		}
		field := b[:len(b)-len(rest)]
		switch wire {
		case wireVarint, wireFixed64, wireFixed32:
			if val != nil {
				t.Fatalf("Next(%q) = wire type %d with value %q, want nil", b, wire, val)
			}
		case wireBytes:
			if len(val) > 0 && &val[len(val)-1] != &field[len(field)-1] {
				t.Fatalf("Next(%q) val = %q, want the end of the field %q", b, val, field)
			}
			if !bytes.HasSuffix(field, val) {
				t.Fatalf("Next(%q) val = %q, want the end of the field %q", b, val, field)
			}
		default:
			t.Fatalf("Next(%q) wire = %d, want 0, 1, 2 or 5", b, wire)
		}
	})
}

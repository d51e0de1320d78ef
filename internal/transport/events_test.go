package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A watch as the API server sends it, in JSON (one object per event) or
// protobuf (length-prefixed metav1.WatchEvent frames, each object in its
// envelope).

func namedPod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

var expired = &metav1.Status{
	TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
	Status:   metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
	Message: "too old resource version: 1 (5)",
}

func jsonEvent(t *testing.T, typ string, obj any) string {
	t.Helper()
	object, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(object)})
	return string(ev) + "\n"
}

// pbFrame is a protobuf watch frame of an event of type typ whose
// object is the enveloped message obj of kind.
func pbFrame(t *testing.T, typ, kind string, obj protowire.Message) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	object := protowire.Envelope("v1", kind, raw)
	ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: object}}
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return lengthPrefixed(b)
}

func lengthPrefixed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

var errNotAPod = errors.New("not a pod")

// decodePod is a watch's decode of *corev1.Pod: nil and an error
// wrapping errNotAPod if the object does not decode.
func decodePod(ct string) func(typ string, object []byte) (*corev1.Pod, error) {
	return func(typ string, object []byte) (*corev1.Pod, error) {
		p := new(corev1.Pod)
		var err error
		if protowire.IsProtobuf(ct) {
			var raw []byte
			raw, err = protowire.Object(object, "Pod")
			if err == nil {
				err = p.Unmarshal(raw)
			}
		} else {
			err = json.Unmarshal(object, p)
		}
		if err != nil {
			return nil, errors.Join(errNotAPod, err)
		}
		return p, nil
	}
}

// want is one event NextEvent should return: its type, its object's name
// ("" for none), its Status's code (0 for none), and words of its Err
// ("" for none).
type want struct {
	typ    string
	name   string
	code   int32
	errHas string
}

// readAll reads every event of the watch and checks them against wants,
// then that the stream ends with io.EOF itself.
func readAll(t *testing.T, ct string, body []byte, wants []want) {
	t.Helper()
	e := NewEvents(ct, bytes.NewReader(body))
	for i, w := range wants {
		ev, err := NextEvent(e, "pods", decodePod(ct))
		if err != nil {
			t.Fatalf("%s: event %d: NextEvent err = %v, want %+v", ct, i, err, w)
		}
		name := ""
		if ev.Object != nil {
			name = ev.Object.Name
		}
		var code int32
		if ev.Status != nil {
			code = ev.Status.Code
		}
		errText := ""
		if ev.Err != nil {
			errText = ev.Err.Error()
		}
		ok := ev.Type == w.typ && name == w.name && code == w.code
		ok = ok && (w.errHas == "") == (ev.Err == nil) && strings.Contains(errText, w.errHas)
		if !ok {
			t.Errorf("%s: event %d = {%q %q status %d err %v}, want %+v", ct, i, ev.Type, name, code, ev.Err, w)
		}
	}
	if ev, err := NextEvent(e, "pods", decodePod(ct)); err != io.EOF {
		t.Errorf("%s: after the last event NextEvent = %+v, %v, want io.EOF", ct, ev, err)
	}
}

// Every event type of a watch, JSON and protobuf: objects decoded by the
// caller's decode, an ERROR's Status decoded here, and an event that
// cannot be decoded reported in Err while the stream goes on.
func TestNextEvent_EveryEventType_JSONAndProtobuf(t *testing.T) {
	wants := []want{
		{"ADDED", "a", 0, ""},
		{"MODIFIED", "a", 0, ""},
		{"DELETED", "a", 0, ""},
		{"BOOKMARK", "", 0, ""},
		{"ERROR", "", 410, ""},
		{"WEIRD", "", 0, `kctl: the watch of pods sent an event of unknown type "WEIRD"`},
		{"ERROR", "", 0, "kctl: the watch of pods sent an ERROR event without a Status"},
		{"ADDED", "", 0, "(in a ADDED watch event)"},
		{"DELETED", "b", 0, ""},
	}

	var js strings.Builder
	for _, s := range []string{
		jsonEvent(t, "ADDED", namedPod("a", "1")),
		jsonEvent(t, "MODIFIED", namedPod("a", "2")),
		jsonEvent(t, "DELETED", namedPod("a", "3")),
		jsonEvent(t, "BOOKMARK", namedPod("", "4")),
		jsonEvent(t, "ERROR", expired),
		jsonEvent(t, "WEIRD", namedPod("a", "5")),
		jsonEvent(t, "ERROR", namedPod("a", "6")), // kind is not Status
		`{"type":"ADDED","object":{"metadata":{"name":5}}}` + "\n",
		jsonEvent(t, "DELETED", namedPod("b", "7")),
	} {
		js.WriteString(s)
	}
	readAll(t, "application/json", []byte(js.String()), wants)

	var pb []byte
	for _, f := range [][]byte{
		pbFrame(t, "ADDED", "Pod", namedPod("a", "1")),
		pbFrame(t, "MODIFIED", "Pod", namedPod("a", "2")),
		pbFrame(t, "DELETED", "Pod", namedPod("a", "3")),
		pbFrame(t, "BOOKMARK", "Pod", namedPod("", "4")),
		pbFrame(t, "ERROR", "Status", expired),
		pbFrame(t, "WEIRD", "Pod", namedPod("a", "5")),
		pbFrame(t, "ERROR", "Pod", namedPod("a", "6")),
		pbFrame(t, "ADDED", "Service", &corev1.Service{}), // decode wants a Pod
		pbFrame(t, "DELETED", "Pod", namedPod("b", "7")),
	} {
		pb = append(pb, f...)
	}
	readAll(t, protowire.Media+";stream=watch", pb, wants)
}

// An ERROR event's Status is the server's, whole: its reason and message.
// An object decode rejects is in Err with decode's own error.
func TestNextEvent_StatusAndDecodeErrorsKeepTheirCause(t *testing.T) {
	body := jsonEvent(t, "ERROR", expired) + `{"type":"MODIFIED","object":{"spec":{"containers":5}}}`
	e := NewEvents("application/json", strings.NewReader(body))
	ev, err := NextEvent(e, "pods", decodePod("application/json"))
	if err != nil || ev.Status == nil || ev.Status.Reason != metav1.StatusReasonExpired || ev.Status.Message != expired.Message {
		t.Errorf("NextEvent(ERROR) = %+v, %v, want the Status %+v", ev, err, expired)
	}
	ev, err = NextEvent(e, "pods", decodePod("application/json"))
	var typeErr *json.UnmarshalTypeError
	if err != nil || !errors.Is(ev.Err, errNotAPod) || !errors.As(ev.Err, &typeErr) || ev.Object != nil {
		t.Errorf("NextEvent(MODIFIED not a pod) = %+v, %v, want Err wrapping %v and a *json.UnmarshalTypeError", ev, err, errNotAPod)
	}
}

// A stream cut short, or a frame that is garbage, ends the watch with an
// error that names it ("broke") and wraps the cause; a frame that is no
// watch event is reported in Err and the stream goes on.
func TestNextEvent_BrokenStreams(t *testing.T) {
	pbCT := protowire.Media + ";stream=watch"
	good := pbFrame(t, "ADDED", "Pod", namedPod("a", "1"))
	notAnEvent := lengthPrefixed([]byte{0x0a, 0x09, 'A'}) // field 1 of 9 bytes, 1 there
	overLimit := binary.BigEndian.AppendUint32(nil, protowire.MaxFrame+1)
	for _, tc := range []struct {
		what     string
		ct       string
		body     []byte
		wantErr  []string // words of NextEvent's error after the good event
		wantIs   error
		wantEvOK bool // the stream goes on: an event with Err, then the good one again
	}{
		{"JSON cut in an object", "application/json",
			[]byte(jsonEvent(t, "ADDED", namedPod("a", "1")) + `{"type":"ADDED","object":{"metadata":`),
			[]string{"kctl: watch of pods broke"}, io.ErrUnexpectedEOF, false},
		{"JSON garbage", "application/json",
			[]byte(jsonEvent(t, "ADDED", namedPod("a", "1")) + `<html>`),
			[]string{"kctl: watch of pods broke", "invalid character"}, nil, false},
		{"protobuf cut in the length", pbCT,
			append(bytes.Clone(good), 0, 0),
			[]string{"kctl: watch of pods broke"}, io.ErrUnexpectedEOF, false},
		{"protobuf cut in the frame", pbCT,
			append(bytes.Clone(good), good[:len(good)-3]...),
			[]string{"kctl: watch of pods broke", "truncated frame"}, io.ErrUnexpectedEOF, false},
		{"protobuf frame over the limit", pbCT,
			append(bytes.Clone(good), overLimit...),
			[]string{"kctl: watch of pods broke", "over the"}, nil, false},
		{"protobuf frame that is no watch event", pbCT,
			append(append(bytes.Clone(good), notAnEvent...), good...),
			nil, nil, true},
	} {
		e := NewEvents(tc.ct, bytes.NewReader(tc.body))
		if ev, err := NextEvent(e, "pods", decodePod(tc.ct)); err != nil || ev.Object == nil || ev.Object.Name != "a" {
			t.Fatalf("%s: first NextEvent = %+v, %v, want ADDED a", tc.what, ev, err)
		}
		ev, err := NextEvent(e, "pods", decodePod(tc.ct))
		if tc.wantEvOK {
			if err != nil || ev.Err == nil || !strings.Contains(ev.Err.Error(), "kctl: decoding a watch event of pods") {
				t.Errorf("%s: NextEvent = %+v, %v, want Err decoding a watch event of pods", tc.what, ev, err)
			}
			if ev, err := NextEvent(e, "pods", decodePod(tc.ct)); err != nil || ev.Object == nil || ev.Object.Name != "a" {
				t.Errorf("%s: NextEvent after it = %+v, %v, want ADDED a", tc.what, ev, err)
			}
			continue
		}
		if err == nil || err == io.EOF || ev.Type != "" || ev.Object != nil {
			t.Errorf("%s: NextEvent = %+v, %v, want no event and an error", tc.what, ev, err)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: NextEvent err = %q, want it to say %q", tc.what, err, w)
			}
		}
		if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
			t.Errorf("%s: NextEvent err = %v, want it to wrap %v", tc.what, err, tc.wantIs)
		}
	}
}

// A watch that ends before any event ends with io.EOF itself, which
// callers compare with ==.
func TestNextEvent_EmptyStreamIsEOF(t *testing.T) {
	for _, ct := range []string{"application/json", protowire.Media + ";stream=watch"} {
		e := NewEvents(ct, strings.NewReader(""))
		if _, err := NextEvent(e, "pods", decodePod(ct)); err != io.EOF {
			t.Errorf("%s: NextEvent of an empty stream = %v, want io.EOF", ct, err)
		}
	}
}

// closeCounter is a watch body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error {
	c.closed++
	return nil
}

// A Stream reads the events of its body with the caller's decode, ends
// with io.EOF, and closes its body on Close.
func TestStream_NextDecodesUntilEOFAndCloseClosesTheBody(t *testing.T) {
	const ct = "application/json"
	body := jsonEvent(t, "ADDED", namedPod("a", "1")) +
		jsonEvent(t, "BOOKMARK", namedPod("", "2"))
	rc := &closeCounter{Reader: strings.NewReader(body)}
	var types []string
	decode := func(typ string, object []byte) (*corev1.Pod, error) {
		types = append(types, typ)
		return decodePod(ct)(typ, object)
	}
	s := NewStream(ct, rc, "pods", decode)
	if s.ContentType() != ct {
		t.Errorf("ContentType() = %q, want %q", s.ContentType(), ct)
	}
	ev, err := s.Next()
	if err != nil || ev.Type != "ADDED" || ev.Object.Name != "a" {
		t.Fatalf("first Next = %+v, %v; want ADDED a", ev, err)
	}
	ev, err = s.Next()
	if err != nil || ev.Type != "BOOKMARK" || ev.Object.ResourceVersion != "2" {
		t.Fatalf("second Next = %+v, %v; want BOOKMARK at 2", ev, err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("Next at the end = %v, want io.EOF", err)
	}
	if got := strings.Join(types, ","); got != "ADDED,BOOKMARK" {
		t.Errorf("decode saw %s, want ADDED,BOOKMARK", got)
	}
	if err := s.Close(); err != nil || rc.closed != 1 {
		t.Errorf("Close = %v, body closed %d times; want nil, once", err, rc.closed)
	}
}

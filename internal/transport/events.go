package transport

// A watch's events decoded: each object by the caller's decode, an ERROR
// event's Status here, and the errors that name the watch.

import (
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event is one decoded watch event, of objects of type P.
type Event[P any] struct {
	// Type is "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR".
	Type string
	// Object is nil for ERROR and when Err is set.
	Object P
	// Status is the server's status for ERROR.
	Status *metav1.Status
	// Err: this event's object failed to decode; the stream goes on.
	Err error
}

// NextEvent reads e's next event (Events.Next) and decodes it: its
// object with decode, given the event's type and the object's bytes
// (enveloped if protobuf, valid only until decode returns); an ERROR
// event's Status itself. what names the watched resource in errors. An
// error ends the stream (io.EOF: closed cleanly); an event that cannot
// be decoded has Err set, and the stream goes on.
func NextEvent[P any](
	e *Events,
	what string,
	decode func(typ string, object []byte) (P, error),
) (Event[P], error) {
	var ev Event[P]
	read := func(typ string, object []byte) {
		ev = decodeEvent(e.contentType, what, typ, object, decode)
	}
	bad, err := e.Next(read)
	switch {
	case err == io.EOF:
		return Event[P]{}, err
	case err != nil:
		err = fmt.Errorf("kctl: watch of %s broke: %w", what, err)
		return Event[P]{}, err
	case bad != nil:
		err = fmt.Errorf("kctl: decoding a watch event of %s: %w",
			what, bad)
		return Event[P]{Err: err}, nil
	}
	return ev, nil
}

// decodeEvent decodes one watch event's object, of Content-Type ct.
func decodeEvent[P any](
	ct, what, typ string,
	raw []byte,
	decode func(typ string, object []byte) (P, error),
) Event[P] {
	ev := Event[P]{Type: typ}
	switch typ {
	case "ERROR":
		st, ok := DecodeStatus(ct, raw)
		if ok {
			ev.Status = st
		} else {
			ev.Err = fmt.Errorf("kctl: the watch of %s sent "+
				"an ERROR event without a Status", what)
		}
	case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
		// a protobuf event's object is enveloped
		obj, err := decode(typ, raw)
		if err != nil {
			ev.Err = fmt.Errorf("%w (in a %s watch event)", err, typ)
			return ev // Object stays nil, as Event says
		}
		ev.Object = obj
	default:
		ev.Err = fmt.Errorf("kctl: the watch of %s sent "+
			"an event of unknown type %q", what, typ)
	}
	return ev
}

// Stream reads one watch response event by event, each object decoded
// by the caller's decode (NextEvent). Close may be called concurrently
// with Next (it unblocks Next); Next is not for concurrent use.
type Stream[P any] struct {
	body io.ReadCloser
	// events reads the answer's events as bytes.
	events *Events
	// what names the watched resource in errors.
	what   string
	decode func(typ string, object []byte) (P, error)
}

// NewStream reads body, a watch's answer of Content-Type contentType,
// decoding each event's object with decode (see NextEvent); what names
// the watched resource in errors.
func NewStream[P any](
	contentType string,
	body io.ReadCloser,
	what string,
	decode func(typ string, object []byte) (P, error),
) *Stream[P] {
	return &Stream[P]{
		body:   body,
		events: NewEvents(contentType, body),
		what:   what,
		decode: decode,
	}
}

// Next returns the next event (NextEvent): an error ends the stream
// (io.EOF: closed cleanly); an event whose object cannot be decoded has
// Err set.
func (s *Stream[P]) Next() (Event[P], error) {
	return NextEvent(s.events, s.what, s.decode)
}

// ContentType is the answer's, of every event's object.
func (s *Stream[P]) ContentType() string { return s.events.contentType }

// Close ends the stream and releases its connection.
func (s *Stream[P]) Close() error { return s.body.Close() }

package kctl

// The watch stream: one watch response read event by event (its bytes by
// internal/transport: a protobuf watch's frames, a JSON one's objects),
// each object decoded into P (*T) by the codec (codec.go).

import (
	"fmt"
	"io"

	"github.com/kctl-dev/kctl/internal/presize"
	"github.com/kctl-dev/kctl/internal/transport"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchEvent is one decoded watch event.
type watchEvent[P any] struct {
	// Type is "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR".
	Type string
	// Object is nil for ERROR and when Err is set.
	Object P
	// Status is the server's status for ERROR.
	Status *metav1.Status
	// Err: this event's object failed to decode; the stream goes on.
	Err error
}

// watchStream reads one watch response. Close may be called concurrently
// with Next (it unblocks Next); Next is not for concurrent use.
type watchStream[P any] struct {
	c    codec[P]
	body io.ReadCloser
	// ct is the answer's Content-Type, of every event's object.
	ct string
	// events reads the answer's events as bytes.
	events *transport.Events
}

func newWatchStream[P any](
	c codec[P],
	contentType string,
	body io.ReadCloser,
) *watchStream[P] {
	if c.reuse {
		c.memo = presize.NewMemo() // until the first bookmark
	}
	return &watchStream[P]{
		c:      c,
		body:   body,
		ct:     contentType,
		events: transport.NewEvents(contentType, body),
	}
}

// Next returns the next event; an error ends the stream (io.EOF: closed
// cleanly). An event whose object cannot be decoded has Err set.
func (w *watchStream[P]) Next() (watchEvent[P], error) {
	var ev watchEvent[P]
	decode := func(typ string, object []byte) {
		if typ == "BOOKMARK" {
			w.c.memo = nil
		}
		ev = w.c.event(typ, object, w.ct)
	}
	bad, err := w.events.Next(decode)
	if err != nil {
		return watchEvent[P]{}, w.broke(err)
	}
	if bad != nil {
		err = fmt.Errorf("kctl: decoding a watch event of %s: %w",
			w.c.res, bad)
		return watchEvent[P]{Err: err}, nil
	}
	return ev, nil
}

// broke is the error that ends a stream: io.EOF for a clean end.
func (w *watchStream[P]) broke(err error) error {
	if err == io.EOF {
		return err
	}
	return fmt.Errorf("kctl: watch of %s broke: %w", w.c.res, err)
}

// event decodes one watch event's object, of Content-Type ct.
func (c codec[P]) event(typ string, raw []byte, ct string) watchEvent[P] {
	ev := watchEvent[P]{Type: typ}
	switch typ {
	case "ERROR":
		if st, ok := transport.DecodeStatus(ct, raw); ok {
			ev.Status = st
		} else {
			ev.Err = fmt.Errorf("kctl: the watch of %s sent "+
				"an ERROR event without a Status", c.res)
		}
	case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
		// a protobuf event's object is enveloped
		obj, err := c.decode(ct, raw)
		if err != nil {
			ev.Err = fmt.Errorf("%w (in a %s watch event)", err, typ)
		}
		ev.Object = obj
	default:
		ev.Err = fmt.Errorf("kctl: the watch of %s sent "+
			"an event of unknown type %q", c.res, typ)
	}
	return ev
}

// Close ends the stream and releases its connection.
func (w *watchStream[P]) Close() error { return w.body.Close() }

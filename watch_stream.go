package kctl

// The watch stream: one watch response read event by event, each object
// decoded into P (*T) by the codec (codec.go). A protobuf watch is frames
// (read by internal/protowire); a JSON one, a stream of JSON objects.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kctl-dev/kctl/internal/presize"
	"github.com/kctl-dev/kctl/internal/protowire"
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

// bigEvent is the size of a JSON watch event after which the stream's
// decoder, whose buffer only grows, is made again.
const bigEvent = 16 << 10

// watchStream reads one watch response. Close may be called concurrently
// with Next (it unblocks Next); Next is not for concurrent use.
type watchStream[P any] struct {
	c     codec[P]
	body  io.ReadCloser
	proto bool
	// dec decodes JSON watches; it is made again after a bigEvent.
	dec *json.Decoder
}

func newWatchStream[P any](
	c codec[P],
	contentType string,
	body io.ReadCloser,
) *watchStream[P] {
	if c.reuse {
		c.memo = presize.NewMemo() // until the first bookmark
	}
	w := &watchStream[P]{
		c:     c,
		body:  body,
		proto: isProto(contentType),
	}
	if !w.proto {
		w.dec = json.NewDecoder(body)
	}
	return w
}

// Next returns the next event; an error ends the stream (io.EOF: closed
// cleanly). An event whose object cannot be decoded has Err set.
func (w *watchStream[P]) Next() (watchEvent[P], error) {
	if !w.proto {
		return w.nextJSON()
	}
	n, err := protowire.FrameSize(w.body)
	if err != nil {
		return watchEvent[P]{}, w.broke(err)
	}
	// A buffer of the pool (conn.go), given back once the event is
	// decoded: a watch that kept its own would hold one as large as the
	// largest event it has carried, namespaces x largest object in all.
	buf := bodies.Get().(*bytes.Buffer)
	defer putBody(buf)
	frame, err := protowire.ReadFrame(w.body, n, buf)
	if err != nil {
		return watchEvent[P]{}, w.broke(err)
	}
	typ, object, err := protowire.WatchEvent(frame)
	if err != nil {
		err = fmt.Errorf("kctl: decoding a watch event of %s: %w",
			w.c.res, err)
		return watchEvent[P]{Err: err}, nil
	}
	if string(typ) == "BOOKMARK" {
		w.c.memo = nil
	}
	return w.c.event(string(typ), object, mediaProtobuf), nil
}

// nextJSON is Next of a JSON watch.
func (w *watchStream[P]) nextJSON() (watchEvent[P], error) {
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := w.dec.Decode(&ev); err != nil {
		return watchEvent[P]{}, w.broke(err)
	}
	if len(ev.Object) > bigEvent {
		// what it read ahead, then the rest
		ahead := w.dec.Buffered()
		rest := io.MultiReader(ahead, w.body)
		w.dec = json.NewDecoder(rest)
	}
	return w.c.event(ev.Type, ev.Object, mediaJSON), nil
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
		if st, ok := decodeStatus(ct, raw); ok {
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

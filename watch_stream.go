package kctl

// A watch stream: the events of one watch response, decoded one at a time
// from protobuf frames or a JSON stream.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchEvent is one decoded watch event.
type watchEvent[T any] struct {
	Type   string         // "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR"
	Object *T             // nil for ERROR and when Err is set
	Status *metav1.Status // the server's status for ERROR
	Err    error          // this event's object failed to decode; the stream goes on
}

// watchStream reads one watch response. Close may be called concurrently
// with Next (it unblocks Next); Next is not for concurrent use.
type watchStream[T any] struct {
	c     codec[T]
	body  io.ReadCloser
	proto bool
	dec   *json.Decoder // JSON watches
	buf   []byte        // protobuf frame buffer, reused
}

func newWatchStream[T any](c codec[T], contentType string, body io.ReadCloser) *watchStream[T] {
	w := &watchStream[T]{c: c, body: body, proto: isProto(contentType)}
	if !w.proto {
		w.dec = json.NewDecoder(body)
	}
	return w
}

// Next returns the next event; an error ends the stream (io.EOF: closed
// cleanly). An event whose object cannot be decoded has Err set.
func (w *watchStream[T]) Next() (watchEvent[T], error) {
	if !w.proto {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := w.dec.Decode(&ev); err != nil {
			return watchEvent[T]{}, w.broke(err)
		}
		return w.c.event(ev.Type, ev.Object, mediaJSON), nil
	}
	var hdr [4]byte
	if _, err := io.ReadFull(w.body, hdr[:]); err != nil {
		return watchEvent[T]{}, w.broke(err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return watchEvent[T]{}, w.broke(fmt.Errorf("frame of %d bytes is over the %d limit", n, maxFrame))
	}
	if cap(w.buf) < int(n) {
		w.buf = make([]byte, n)
	}
	frame := w.buf[:n]
	if _, err := io.ReadFull(w.body, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return watchEvent[T]{}, w.broke(fmt.Errorf("truncated frame of %d bytes: %w", n, err))
	}
	// A metav1.WatchEvent, parsed by hand so that nothing copies the object:
	// field 1 the type, field 2 a RawExtension whose field 1 is the object.
	typ, errType := field(frame, 1)
	ext, _ := field(frame, 2)
	object, errObject := field(ext, 1)
	if err := errors.Join(errType, errObject); err != nil {
		return watchEvent[T]{Err: fmt.Errorf("kctl: decoding a watch event of %s: %w", w.c.res, err)}, nil
	}
	return w.c.event(string(typ), object, mediaProtobuf), nil
}

// broke is the error that ends a stream: io.EOF for a clean end.
func (w *watchStream[T]) broke(err error) error {
	if err == io.EOF {
		return err
	}
	return fmt.Errorf("kctl: watch of %s broke: %w", w.c.res, err)
}

// event decodes one watch event's object, of Content-Type ct.
func (c codec[T]) event(typ string, raw []byte, ct string) watchEvent[T] {
	ev := watchEvent[T]{Type: typ}
	switch typ {
	case "ERROR":
		if st, ok := decodeStatus(ct, raw); ok {
			ev.Status = st
		} else {
			ev.Err = fmt.Errorf("kctl: the watch of %s sent an ERROR event without a Status", c.res)
		}
	case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
		obj, err := c.decode(ct, raw) // a protobuf event's object is enveloped
		if err != nil {
			ev.Err = fmt.Errorf("%w (in a %s watch event)", err, typ)
		}
		ev.Object = obj
	default:
		ev.Err = fmt.Errorf("kctl: the watch of %s sent an event of unknown type %q", c.res, typ)
	}
	return ev
}

// Close ends the stream and releases its connection.
func (w *watchStream[T]) Close() error { return w.body.Close() }

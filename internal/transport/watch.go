package transport

// A watch's answer: bounded on the client a little past the time it asks
// the server for, and read event by event as raw bytes (a protobuf
// watch's frames, by internal/protowire, or a JSON watch's objects).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kctl-dev/kctl/internal/protowire"
)

// WatchBound is how long the client lets a watch run that asked the
// server to end it after timeout: 10% more, at most 30 s, and 1 s.
func WatchBound(timeout time.Duration) time.Duration {
	grace := min(timeout/10, 30*time.Second)
	return timeout + grace + time.Second
}

// WatchDeadline is ctx ended at WatchBound(timeout), for a watch (named
// what in errors) that asked the server to end it after timeout: its
// cause says that the connection was still silent.
func WatchDeadline(
	ctx context.Context,
	timeout time.Duration,
	what string,
) (context.Context, context.CancelFunc) {
	bound := WatchBound(timeout)
	silent := fmt.Errorf("kctl: the watch of %s asked "+
		"the server to end it after %v, and %v later "+
		"the connection was still silent", what, timeout,
		bound-timeout)
	return context.WithTimeoutCause(ctx, bound, silent)
}

// WatchBody is body, a watch's answer, read under the watch's deadline
// (ctx, ended by cancel: WatchDeadline's): a read cut by it fails with
// the deadline's cause. Closing it cancels ctx.
func WatchBody(
	ctx context.Context,
	cancel context.CancelFunc,
	body io.ReadCloser,
) io.ReadCloser {
	return &watchBody{ReadCloser: body, ctx: ctx, cancel: cancel}
}

type watchBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	ended := b.ctx.Err() != nil
	if err != nil && err != io.EOF && ended {
		err = context.Cause(b.ctx)
	}
	return n, err
}

func (b *watchBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}

// bigEvent is the size of a JSON watch event after which the stream's
// decoder, whose buffer only grows, is made again.
const bigEvent = 16 << 10

// Events reads a watch's answer event by event. Next is not for
// concurrent use.
type Events struct {
	body io.Reader
	// contentType is the answer's, of every event's object.
	contentType string
	proto       bool
	// dec decodes JSON watches; it is made again after a bigEvent.
	dec *json.Decoder
}

// NewEvents reads body, a watch's answer of Content-Type contentType.
func NewEvents(contentType string, body io.Reader) *Events {
	e := &Events{
		body:        body,
		contentType: contentType,
		proto:       protowire.IsProtobuf(contentType),
	}
	if !e.proto {
		e.dec = json.NewDecoder(body)
	}
	return e
}

// Next reads the next event and hands its type and its object (a
// protobuf one enveloped) to event, valid only until event returns. An
// error ends the stream (io.EOF: cleanly); bad is a protobuf frame that
// is no watch event, after which the stream goes on.
func (e *Events) Next(event func(typ string, object []byte)) (bad, err error) {
	if !e.proto {
		return nil, e.nextJSON(event)
	}
	n, err := protowire.FrameSize(e.body)
	if err != nil {
		return nil, err
	}
	// A buffer of the pool, given back once the event is decoded: a
	// watch that kept its own would hold one as large as the largest
	// event it has carried, namespaces x largest object in all.
	buf := GetBuffer()
	defer PutBuffer(buf)
	frame, err := protowire.ReadFrame(e.body, n, buf)
	if err != nil {
		return nil, err
	}
	typ, object, bad := protowire.WatchEvent(frame)
	if bad != nil {
		return bad, nil
	}
	event(string(typ), object)
	return nil, nil
}

// nextJSON is Next of a JSON watch.
func (e *Events) nextJSON(event func(typ string, object []byte)) error {
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := e.dec.Decode(&ev); err != nil {
		return err
	}
	if len(ev.Object) > bigEvent {
		// what it read ahead, then the rest
		ahead := e.dec.Buffered()
		rest := io.MultiReader(ahead, e.body)
		e.dec = json.NewDecoder(rest)
	}
	event(ev.Type, ev.Object)
	return nil
}

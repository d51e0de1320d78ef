package kctltest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// memTransport is an http.RoundTripper that hands each request to an
// http.Handler in the same process: no socket, no port, no TLS. A watch's
// answer streams (its body is a pipe the handler writes to, and closing it
// ends the handler's context); any other answer is whole when RoundTrip
// returns.
type memTransport struct {
	h http.Handler
}

func (m *memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if req.Body == nil {
		req.Body = http.NoBody
	}
	q := req.URL.Query()
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		rec := httptest.NewRecorder()
		m.h.ServeHTTP(rec, req)
		resp := rec.Result()
		resp.Request = req
		return resp, nil
	}
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	sw := &streamWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer pw.Close()
		defer sw.WriteHeader(http.StatusOK) // a handler that wrote nothing
		m.h.ServeHTTP(sw, req.WithContext(ctx))
	}()
	select {
	case <-sw.ready:
	case <-ctx.Done():
		cancel()
		pr.Close()
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:        http.StatusText(sw.code),
		StatusCode:    sw.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        sw.sent,
		Body:          &streamBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// streamWriter is the http.ResponseWriter of a streamed answer: the
// header is ready at the first WriteHeader (or Write), and each Write
// waits until the client has read it.
type streamWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	code   int         // set once ready is closed
	sent   http.Header // the header as sent: set once ready is closed
	ready  chan struct{}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

func (w *streamWriter) Flush() {}

// streamBody is a streamed answer's body: Close ends the handler.
type streamBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *streamBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

package kctl

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file is kctl's wire: the codecs, the watch stream, the server's
// errors, and the HTTP round trip with its rate limit and 429 retries.
//
// Wire formats. Built-in (k8s.io/api) types travel as protobuf: a body is
// "k8s\x00" followed by a runtime.Unknown whose Raw holds the object's own
// protobuf. A list's Raw is the XList message: field 1 the ListMeta, field 2
// each item. A protobuf watch is a sequence of frames, each a 4-byte
// big-endian length and a metav1.WatchEvent (without the envelope) whose
// Object.Raw is an enveloped object. Declared (custom) types travel as JSON;
// a JSON watch is a sequence of {"type": ..., "object": ...} documents.
// Responses are decoded by their Content-Type, so a built-in answered in JSON
// still decodes.
const (
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	mediaJSON     = "application/json"
	maxFrame      = 64 << 20 // a watch frame larger than this is garbage: etcd stores objects up to 1.5 MiB
)

var protoMagic = []byte("k8s\x00")

// protoObject is implemented by *T for every k8s.io/api type T.
type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// codec encodes and decodes the objects of one resource. The zero value is
// unusable; newCodec makes one. A codec is immutable and goroutine-safe.
type codec[T any] struct {
	res        Resource
	apiVersion string
	proto      bool // requests are protobuf and responses are asked for in protobuf
}

func newCodec[T any](res Resource, builtin bool) codec[T] {
	_, ok := any(new(T)).(protoObject)
	return codec[T]{res: res, apiVersion: res.APIVersion(), proto: ok && builtin}
}

// accept is the Accept header for a request, or for a watch when watch is set.
func (c codec[T]) accept(watch bool) string {
	switch {
	case !c.proto:
		return mediaJSON
	case watch:
		return mediaProtobuf + ";stream=watch, " + mediaJSON
	}
	return mediaProtobuf + ", " + mediaJSON
}

func isProto(contentType string) bool { return strings.HasPrefix(contentType, mediaProtobuf) }

// setTypeMeta fills obj's apiVersion and kind: protobuf does not carry them,
// and kctl returns every object with them set.
func (c codec[T]) setTypeMeta(obj *T) {
	if o, ok := any(obj).(interface{ GetObjectKind() schema.ObjectKind }); ok {
		if tm, ok := o.GetObjectKind().(*metav1.TypeMeta); ok && tm != nil {
			tm.APIVersion, tm.Kind = c.apiVersion, c.res.Kind
		}
	}
}

// encode returns obj as a request body and its Content-Type. It sets obj's
// apiVersion and kind.
func (c codec[T]) encode(obj *T) ([]byte, string, error) {
	c.setTypeMeta(obj)
	if !c.proto {
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, "", fmt.Errorf("kctl: encoding %s %s as JSON: %w", c.res, keyOf(metaOf(obj)), err)
		}
		return b, mediaJSON, nil
	}
	raw, err := any(obj).(protoObject).Marshal()
	if err != nil {
		return nil, "", fmt.Errorf("kctl: encoding %s %s as protobuf: %w", c.res, keyOf(metaOf(obj)), err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: c.apiVersion, Kind: c.res.Kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		return nil, "", fmt.Errorf("kctl: encoding %s %s as protobuf: %w", c.res, keyOf(metaOf(obj)), err)
	}
	return append(append(make([]byte, 0, len(b)+4), protoMagic...), b...), mediaProtobuf, nil
}

// decode decodes one object from a response body.
func (c codec[T]) decode(contentType string, body []byte) (*T, error) {
	if isProto(contentType) {
		u, err := unwrap(body)
		if err != nil {
			return nil, fmt.Errorf("kctl: decoding %s: %w", c.res, err)
		}
		if u.Kind != "" && u.Kind != c.res.Kind {
			return nil, fmt.Errorf("kctl: decoding %s: the server sent a %s, want a %s", c.res, u.Kind, c.res.Kind)
		}
		return c.decodeItem(u.Raw, true)
	}
	return c.decodeItem(body, false)
}

// decodeItem decodes one object's own bytes (no envelope). The error names
// the object when its name can still be read. It never panics.
func (c codec[T]) decodeItem(raw []byte, proto bool) (obj *T, err error) {
	defer func() {
		if r := recover(); r != nil {
			obj, err = nil, fmt.Errorf("decoder panic: %v", r)
		}
		if err != nil {
			err = fmt.Errorf("kctl: decoding %s%s: %w", c.res, nameIn(raw, proto), err)
		}
	}()
	obj = new(T)
	if proto {
		p, ok := any(obj).(protoObject)
		if !ok {
			return nil, errors.New("the server sent protobuf for a type without protobuf support")
		}
		err = p.Unmarshal(raw)
	} else {
		err = json.Unmarshal(raw, obj)
	}
	if err != nil {
		return nil, err
	}
	c.setTypeMeta(obj)
	return obj, nil
}

// decodeList decodes a list response into individually allocated objects.
// A bad item fails the whole list, naming the item.
func (c codec[T]) decodeList(contentType string, body []byte) ([]*T, metav1.ListMeta, error) {
	var meta metav1.ListMeta
	if !isProto(contentType) {
		var list struct {
			Metadata metav1.ListMeta   `json:"metadata"`
			Items    []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, meta, fmt.Errorf("kctl: decoding a list of %s: %w", c.res, err)
		}
		items := make([]*T, len(list.Items))
		for i, raw := range list.Items {
			obj, err := c.decodeItem(raw, false)
			if err != nil {
				return nil, meta, err
			}
			items[i] = obj
		}
		return items, list.Metadata, nil
	}
	u, err := unwrap(body)
	if err != nil {
		return nil, meta, fmt.Errorf("kctl: decoding a list of %s: %w", c.res, err)
	}
	n := 0
	if err := eachField(u.Raw, func(f int, _ []byte) error {
		if f == 2 {
			n++
		}
		return nil
	}); err != nil {
		return nil, meta, fmt.Errorf("kctl: decoding a list of %s: %w", c.res, err)
	}
	items := make([]*T, 0, n)
	err = eachField(u.Raw, func(f int, b []byte) error {
		switch f {
		case 1:
			if err := meta.Unmarshal(b); err != nil {
				return fmt.Errorf("kctl: decoding the list metadata of %s: %w", c.res, err)
			}
		case 2:
			obj, err := c.decodeItem(b, true)
			if err != nil {
				return err
			}
			items = append(items, obj)
		}
		return nil
	})
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	return items, meta, nil
}

// decodeStatus returns the metav1.Status in a response body, if it is one.
func decodeStatus(contentType string, body []byte) (*metav1.Status, bool) {
	st := new(metav1.Status)
	if isProto(contentType) {
		u, err := unwrap(body)
		if err != nil || u.Kind != "Status" || safeUnmarshal(st, u.Raw) != nil {
			return nil, false
		}
		return st, true
	}
	if json.Unmarshal(body, st) != nil || st.Kind != "Status" {
		return nil, false
	}
	return st, true
}

// safeUnmarshal is p.Unmarshal(b) that turns a panic into an error.
func safeUnmarshal(p protoObject, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	return p.Unmarshal(b)
}

// unwrap strips the "k8s\x00" envelope.
func unwrap(body []byte) (runtime.Unknown, error) {
	var u runtime.Unknown
	if !bytes.HasPrefix(body, protoMagic) {
		return u, fmt.Errorf("protobuf body without the k8s envelope (%d bytes)", len(body))
	}
	if err := safeUnmarshal(&u, body[len(protoMagic):]); err != nil {
		return u, fmt.Errorf("bad protobuf envelope: %w", err)
	}
	if u.ContentEncoding != "" {
		return u, fmt.Errorf("unsupported protobuf content encoding %q", u.ContentEncoding)
	}
	return u, nil
}

// eachField calls fn for every length-delimited field of the protobuf
// message b, skipping fields of the other wire types.
func eachField(b []byte, fn func(field int, val []byte) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag>>3 == 0 || tag>>3 > 1<<29 {
			return errors.New("bad protobuf field tag")
		}
		b = b[n:]
		var size uint64
		switch tag & 7 {
		case 0: // varint
			if _, n = binary.Uvarint(b); n <= 0 {
				return errors.New("bad protobuf varint")
			}
			size = uint64(n)
		case 1: // fixed64
			size = 8
		case 5: // fixed32
			size = 4
		case 2: // length-delimited
			l, n := binary.Uvarint(b)
			if n <= 0 {
				return errors.New("bad protobuf length")
			}
			b = b[n:]
			if l > uint64(len(b)) {
				return io.ErrUnexpectedEOF
			}
			if err := fn(int(tag>>3), b[:l]); err != nil {
				return err
			}
			size = l
		default:
			return fmt.Errorf("unsupported protobuf wire type %d", tag&7)
		}
		if size > uint64(len(b)) {
			return io.ErrUnexpectedEOF
		}
		b = b[size:]
	}
	return nil
}

// nameIn returns " namespace/name" (or " name") of an undecodable object, or
// "" when even that cannot be read.
func nameIn(raw []byte, proto bool) string {
	var ns, name string
	if proto { // every k8s.io/api object has ObjectMeta as field 1; in it name is 1 and namespace 3
		_ = eachField(raw, func(f int, meta []byte) error {
			if f == 1 {
				_ = eachField(meta, func(f int, v []byte) error {
					switch f {
					case 1:
						name = string(v)
					case 3:
						ns = string(v)
					}
					return nil
				})
				return errors.New("done")
			}
			return nil
		})
	} else {
		var o struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
		}
		_ = json.Unmarshal(raw, &o)
		ns, name = o.Metadata.Namespace, o.Metadata.Name
	}
	if name == "" {
		return ""
	}
	if ns == "" {
		return " " + name
	}
	return " " + ns + "/" + name
}

// watchEvent is one decoded watch event.
type watchEvent[T any] struct {
	Type   string         // "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR"
	Object *T             // nil for ERROR and when Err is set
	Status *metav1.Status // the server's status for ERROR
	Err    error          // this event's object failed to decode; the stream goes on
}

// watchStream reads the events of one watch response. Next and Close may be
// called from different goroutines (Close unblocks Next); Next itself is not
// for concurrent use.
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

// Next returns the next event; an error ends the stream (io.EOF when the
// server closed it cleanly). An event whose object cannot be decoded has Err
// set and the stream goes on.
func (w *watchStream[T]) Next() (watchEvent[T], error) {
	if !w.proto {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := w.dec.Decode(&ev); err != nil {
			if err == io.EOF {
				return watchEvent[T]{}, io.EOF
			}
			return watchEvent[T]{}, fmt.Errorf("kctl: watch of %s broke: %w", w.c.res, err)
		}
		return w.c.event(ev.Type, ev.Object, false), nil
	}
	var hdr [4]byte
	if _, err := io.ReadFull(w.body, hdr[:]); err != nil {
		if err == io.EOF {
			return watchEvent[T]{}, io.EOF
		}
		return watchEvent[T]{}, fmt.Errorf("kctl: watch of %s broke: truncated frame header: %w", w.c.res, err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return watchEvent[T]{}, fmt.Errorf("kctl: watch of %s broke: frame of %d bytes is over the %d limit", w.c.res, n, maxFrame)
	}
	if cap(w.buf) < int(n) {
		w.buf = make([]byte, n)
	}
	frame := w.buf[:n]
	if _, err := io.ReadFull(w.body, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return watchEvent[T]{}, fmt.Errorf("kctl: watch of %s broke: truncated frame of %d bytes: %w", w.c.res, n, err)
	}
	if bytes.HasPrefix(frame, protoMagic) { // tolerate an enveloped WatchEvent
		u, err := unwrap(frame)
		if err != nil {
			return watchEvent[T]{Err: fmt.Errorf("kctl: decoding a watch event of %s: %w", w.c.res, err)}, nil
		}
		frame = u.Raw
	}
	var ev metav1.WatchEvent
	if err := safeUnmarshal(&ev, frame); err != nil {
		return watchEvent[T]{Err: fmt.Errorf("kctl: decoding a watch event of %s: %w", w.c.res, err)}, nil
	}
	return w.c.event(ev.Type, ev.Object.Raw, true), nil
}

// event decodes one watch event's object.
func (c codec[T]) event(typ string, raw []byte, proto bool) watchEvent[T] {
	ev := watchEvent[T]{Type: typ}
	ct := mediaJSON
	if proto {
		ct = mediaProtobuf
	}
	switch typ {
	case "ERROR":
		if st, ok := decodeStatus(ct, raw); ok {
			ev.Status = st
		} else {
			ev.Err = fmt.Errorf("kctl: the watch of %s sent an ERROR event without a Status", c.res)
		}
	case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
		if proto && bytes.HasPrefix(raw, protoMagic) {
			u, err := unwrap(raw)
			if err == nil && u.Kind != "" && u.Kind != c.res.Kind {
				err = fmt.Errorf("the object is a %s, want a %s", u.Kind, c.res.Kind)
			}
			if err != nil {
				ev.Err = fmt.Errorf("kctl: decoding a %s watch event of %s: %w", typ, c.res, err)
				return ev
			}
			raw = u.Raw
		}
		obj, err := c.decodeItem(raw, proto)
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

// statusError turns a failed answer into an error wrapping *apierrors.StatusError.
func (c *Client[T]) statusError(verb, key string, resp *http.Response, ct string, body []byte) error {
	st, ok := decodeStatus(ct, body)
	var se *apierrors.StatusError
	if ok {
		se = &apierrors.StatusError{ErrStatus: *st}
	} else {
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		msg := string(body[:min(len(body), 512)])
		name := key[strings.LastIndex(key, "/")+1:] // key is "namespace/name", "name", or "in namespace x" for a list
		if strings.Contains(key, " ") {
			name = ""
		}
		se = apierrors.NewGenericServerResponse(resp.StatusCode, resp.Request.Method,
			schema.GroupResource{Group: c.res.Group, Resource: c.res.Plural}, name, msg, ra, true)
	}
	if resp.StatusCode == http.StatusNotFound && (!ok || st.Details == nil || st.Details.Name == "" && st.Details.Kind == "") {
		return &notInstalledError{res: c.res, builtin: c.builtin, status: se}
	}
	what := strings.TrimSpace(c.res.String() + " " + key)
	if apierrors.IsForbidden(se) {
		rbac := map[string]string{"update status of": "update", "apply": "patch", "delete all of": "deletecollection"}[verb]
		if rbac == "" {
			rbac = verb
		}
		plural := c.res.Plural
		if verb == "update status of" {
			plural += "/status"
		}
		return fmt.Errorf("kctl: %s %s: %w: grant this identity RBAC permission to %s %s", verb, what, se, rbac, plural)
	}
	return fmt.Errorf("kctl: %s %s: %w", verb, what, se)
}

// notInstalledError matches ErrNotInstalled and the server's NotFound status.
type notInstalledError struct {
	res     Resource
	builtin bool
	status  *apierrors.StatusError
}

func (e *notInstalledError) Error() string {
	if e.builtin {
		return fmt.Sprintf("kctl: %s is not served by the API server: the server is too old or too new for it, or its API group is disabled", e.res)
	}
	return fmt.Sprintf("kctl: %s is not installed on the API server: apply its CRD", e.res)
}

func (e *notInstalledError) Unwrap() []error { return []error{ErrNotInstalled, e.status} }

// request is one API call.
type request struct {
	method, path        string
	query               url.Values
	body                []byte
	contentType, accept string
	watch               bool
}

// do sends r, waiting for the rate limiter and retrying 429s; the caller
// closes the response body whatever its status.
func (c *Conn) do(ctx context.Context, r request) (*http.Response, error) {
	u := c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.path
	u.RawQuery = r.query.Encode()
	hc := c.http
	if r.watch {
		hc = c.watches
	}
	for attempt := 0; ; attempt++ {
		if c.limiter != nil {
			if err := c.limiter.Wait(ctx); err != nil {
				return nil, fmt.Errorf("kctl: %s %s: waiting for the client-side rate limit: %w", r.method, r.path, err)
			}
		}
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
		if err != nil {
			return nil, fmt.Errorf("kctl: %s %s: %w", r.method, r.path, err)
		}
		req.Header.Set("Accept", r.accept)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("kctl: %s %s: %w", r.method, r.path, err)
		}
		ra := resp.Header.Get("Retry-After")
		retry := resp.StatusCode == http.StatusTooManyRequests ||
			resp.StatusCode >= 500 && ra != "" && r.method == http.MethodGet
		if !retry || attempt == maxRetries {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		wait := time.Second
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			wait = min(time.Duration(s)*time.Second, maxRetryWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("kctl: %s %s: the server asked to retry after %v: %w", r.method, r.path, wait, ctx.Err())
		case <-t.C:
		}
	}
}

// keyOf is "namespace/name" or "name".
func keyOf(m metav1.Object) string {
	if m.GetNamespace() == "" {
		return m.GetName()
	}
	return m.GetNamespace() + "/" + m.GetName()
}

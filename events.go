package kctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The recorder's limits. The flood limit and the cache size are client-go's
// (tools/record: EventSourceObjectSpamFilter, maxLruCacheEntries,
// maxQueuedEvents); the merge window is client-go's aggregation interval.
const (
	eventBurst       = 25               // Events per object and type before the limit applies
	eventRefill      = 5 * time.Minute  // then one more Event per object and type per 5 minutes
	eventMergeWindow = 10 * time.Minute // a repeat within 10 minutes of the last one is merged into it
	eventBuffer      = 1000             // Events waiting to be written; more are dropped
	eventCacheSize   = 4096             // objects and Events remembered for the limit and for merging
	eventFlushTime   = 3 * time.Second  // how long run writes the buffered Events after its ctx ends
	eventWriteTries  = 3                // attempts per write when the API server is unreachable
)

// EventRecorder writes Kubernetes Events (core/v1) about objects, the ones
// kubectl describe shows:
//
//	rec := mgr.EventRecorder("widget-controller")
//	rec.Eventf(widget, corev1.EventTypeWarning, "BackendFailed", "backend %s: %v", host, err)
//
// Event never blocks and never fails: it puts the Event in a buffer of 1000
// that a background writer (started by the Manager) sends to the API server.
// When the buffer is full, or the writer is not running, new Events are
// dropped, counted and logged once.
//
// Repeats merge: an Event identical to one written less than 10 minutes
// before (same object UID, type, reason and message) increments that Event's
// count and lastTimestamp with a PATCH instead of creating another, so a
// burst of 10 identical Events is one Event with count 10.
//
// Floods are limited per object and type by a token bucket, as in client-go:
// a burst of 25 Events, then one more per 5 minutes; Events beyond the limit
// are dropped silently. Repeats count against the limit, because each one is
// a write.
//
// The zero value is not usable; get one from Manager.EventRecorder. A nil
// *EventRecorder drops everything, which suits unit tests of reconcilers.
// EventRecorder is safe for concurrent use.
type EventRecorder struct {
	component, host string
	log             *slog.Logger
	sink            eventSink
	queue           chan pendingEvent // bounded: Event never blocks

	kinds sync.Map // reflect.Type of *T -> Resource, memoizing resourceFor

	mu     sync.Mutex              // guards limits
	limits map[string]*tokenBucket // by object and type; at most eventCacheSize

	dropped    atomic.Uint64 // Events dropped because the buffer was full
	limited    atomic.Uint64 // Events dropped by the flood limit
	dropLogged atomic.Bool

	runMu    sync.Mutex              // held by run: one writer at a time
	seen     map[eventKey]*seenEvent // written Events, for merging; owned by run
	lastName int64                   // the time in the last Event's name, so names never repeat; owned by run
}

// eventSink writes Events; the API server in production, a fake in unit tests.
type eventSink interface {
	create(ctx context.Context, ev *corev1.Event) error                    // ev is updated from the answer
	patch(ctx context.Context, namespace, name string, patch []byte) error // a JSON merge patch
}

// pendingEvent is one Event call, captured at call time.
type pendingEvent struct {
	ref                  corev1.ObjectReference
	typ, reason, message string
	at                   time.Time
}

// eventKey identifies repeats of an Event.
type eventKey struct {
	object               string // UID, or kind/namespace/name for an object without one
	typ, reason, message string
}

// seenEvent is an Event on the server that repeats merge into.
type seenEvent struct {
	namespace, name string
	count           int32
	last            time.Time
}

// newEventRecorder returns a recorder writing through conn as component (the
// Event's source and reportingComponent). Nothing is written until run.
func newEventRecorder(conn *Conn, component string, log *slog.Logger) *EventRecorder {
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	r := &EventRecorder{
		component: component,
		host:      host[:min(len(host), 128)], // reportingInstance allows 128 characters
		log:       log.With("component", component),
		queue:     make(chan pendingEvent, eventBuffer),
		limits:    map[string]*tokenBucket{},
		seen:      map[eventKey]*seenEvent{},
	}
	if conn != nil {
		r.sink = clientSink{NewClient[corev1.Event](conn)}
	}
	return r
}

// Event records an Event of eventType (corev1.EventTypeNormal or
// corev1.EventTypeWarning) about obj. reason is a short UpperCamelCase
// word for machines ("ScalingReplicaSet"); message is for humans. The
// object's kind and apiVersion come from its Go type (see ResourceOf), else
// from its TypeMeta. Event returns at once; see EventRecorder for what is
// merged, limited and dropped.
func (r *EventRecorder) Event(obj metav1.Object, eventType, reason, message string) {
	if r == nil || obj == nil {
		return
	}
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
		return
	}
	if eventType != corev1.EventTypeNormal && eventType != corev1.EventTypeWarning {
		r.log.Error("kctl: dropped an Event with an unsupported type: use corev1.EventTypeNormal or EventTypeWarning",
			"type", eventType, "reason", reason, "object", obj.GetNamespace()+"/"+obj.GetName())
		return
	}
	ev := pendingEvent{ref: r.objectReference(obj), typ: eventType, reason: reason, message: message, at: time.Now()}
	if !r.allow(ev.key().object+"\x00"+eventType, ev.at) {
		r.limited.Add(1)
		return
	}
	select {
	case r.queue <- ev:
	default:
		if n := r.dropped.Add(1); r.dropLogged.CompareAndSwap(false, true) {
			r.log.Warn("kctl: Event buffer full, dropping Events (logged once): the API server is slow or unreachable, or the Manager is not running",
				"buffer", eventBuffer, "dropped", n, "reason", reason)
		}
	}
}

// Eventf is Event with a message formatted by fmt.Sprintf.
func (r *EventRecorder) Eventf(obj metav1.Object, eventType, reason, format string, args ...any) {
	if r == nil {
		return
	}
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// objectReference is obj's involvedObject.
func (r *EventRecorder) objectReference(obj metav1.Object) corev1.ObjectReference {
	ref := corev1.ObjectReference{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion()}
	if t := reflect.TypeOf(obj); t.Kind() == reflect.Pointer {
		res, ok := r.kinds.Load(t)
		if !ok {
			if found, err := resourceFor(t.Elem()); err == nil {
				res, ok = found, true
				r.kinds.Store(t, found)
			}
		}
		if ok {
			ref.APIVersion, ref.Kind = res.(Resource).APIVersion(), res.(Resource).Kind
			return ref
		}
	}
	if o, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		ref.APIVersion, ref.Kind = o.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	}
	return ref
}

func (e pendingEvent) key() eventKey {
	object := string(e.ref.UID)
	if object == "" {
		object = e.ref.Kind + "/" + e.ref.Namespace + "/" + e.ref.Name
	}
	return eventKey{object: object, typ: e.typ, reason: e.reason, message: e.message}
}

// allow takes a token from key's bucket at now.
func (r *EventRecorder) allow(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.limits[key]
	if b == nil {
		if len(r.limits) >= eventCacheSize {
			pruneLocked(r.limits, func(b *tokenBucket) bool { return b.full(now) })
		}
		b = &tokenBucket{tokens: eventBurst, last: now}
		r.limits[key] = b
	}
	return b.take(now)
}

// tokenBucket holds up to eventBurst tokens and gains one per eventRefill.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

func (b *tokenBucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = min(eventBurst, b.tokens+float64(now.Sub(b.last))/float64(eventRefill))
		b.last = now
	}
}

func (b *tokenBucket) take(now time.Time) bool {
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full reports whether the bucket is as good as new, so forgetting it changes nothing.
func (b *tokenBucket) full(now time.Time) bool { b.refill(now); return b.tokens >= eventBurst }

// pruneLocked deletes the entries stale reports true for; if none is stale it
// deletes an arbitrary one, so m stays under its bound. The caller holds the
// lock guarding m, if any.
func pruneLocked[K comparable, V any](m map[K]V, stale func(V) bool) {
	for k, v := range m {
		if stale(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) < eventCacheSize {
			break
		}
		delete(m, k)
	}
}

// run writes the buffered Events until ctx ends, then for up to 3 seconds
// more writes what is left in the buffer. A write under way when ctx ends
// is finished, not cut off. The Manager calls run once per recorder, on its
// own goroutine; a second concurrent run waits for the first to return.
func (r *EventRecorder) run(ctx context.Context) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	for {
		select {
		case <-ctx.Done():
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventFlushTime)
			defer cancel()
			for flush.Err() == nil {
				select {
				case ev := <-r.queue:
					r.write(flush, ev)
				default:
					return
				}
			}
			if n := len(r.queue); n > 0 {
				r.log.Warn("kctl: shutting down with Events not written (dropped)", "dropped", n)
			}
			return
		case ev := <-r.queue:
			r.write(context.WithoutCancel(ctx), ev) // retries end after eventWriteTries
		}
	}
}

// write sends one Event: a PATCH of the Event it repeats, or a new Event.
func (r *EventRecorder) write(ctx context.Context, ev pendingEvent) {
	key := ev.key()
	if s := r.seen[key]; s != nil && ev.at.Sub(s.last) < eventMergeWindow {
		s.count++
		s.last = ev.at
		patch, _ := json.Marshal(map[string]any{"count": s.count, "lastTimestamp": metav1.NewTime(ev.at)})
		err := r.retry(ctx, func() error { return r.sink.patch(ctx, s.namespace, s.name, patch) })
		if !apierrors.IsNotFound(err) { // else the Event expired (the API server's --event-ttl): write a new one
			r.logWriteError(err, ev)
			return
		}
	}
	e := r.makeEvent(ev)
	if err := r.retry(ctx, func() error { return r.sink.create(ctx, e) }); err != nil {
		delete(r.seen, key)
		r.logWriteError(err, ev)
		return
	}
	if len(r.seen) >= eventCacheSize {
		pruneLocked(r.seen, func(s *seenEvent) bool { return ev.at.Sub(s.last) >= eventMergeWindow })
	}
	r.seen[key] = &seenEvent{namespace: e.Namespace, name: e.Name, count: 1, last: ev.at}
}

// makeEvent builds the new Event for ev, named like client-go's:
// <object name>.<occurrence time in Unix nanoseconds, hex>.
func (r *EventRecorder) makeEvent(ev pendingEvent) *corev1.Event {
	ns := ev.ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // Events about cluster-scoped objects
	}
	r.lastName = max(ev.at.UnixNano(), r.lastName+1) // two Events in one clock tick
	name := fmt.Sprintf("%s.%x", ev.ref.Name, r.lastName)
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		suffix := make([]byte, 8)
		rand.Read(suffix)
		name = "kctl-event." + hex.EncodeToString(suffix)
	}
	t := metav1.NewTime(ev.at)
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
		InvolvedObject:      ev.ref,
		Reason:              ev.reason,
		Message:             ev.message,
		Type:                ev.typ,
		Source:              corev1.EventSource{Component: r.component, Host: r.host},
		ReportingController: r.component,
		ReportingInstance:   r.host,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
	}
}

// retry calls write up to eventWriteTries times while the failure is
// transient (the API server unreachable, overloaded or timing out), waiting
// 1s, then 2s between tries.
func (r *EventRecorder) retry(ctx context.Context, write func() error) error {
	var err error
	for try := 1; ; try++ {
		if err = write(); err == nil || try == eventWriteTries || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}

func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

func (r *EventRecorder) logWriteError(err error, ev pendingEvent) {
	if err == nil {
		return
	}
	level := slog.LevelError
	if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		level = slog.LevelDebug // a collision or a namespace going away: nothing to do
	}
	r.log.Log(context.Background(), level, "kctl: could not write Event (dropped): check the API server and RBAC: create and patch on events",
		"err", err, "object", strings.TrimPrefix(ev.ref.Namespace+"/"+ev.ref.Name, "/"), "kind", ev.ref.Kind,
		"reason", ev.reason)
}

// clientSink writes through kctl's own client.
type clientSink struct{ events *Client[corev1.Event] }

func (s clientSink) create(ctx context.Context, ev *corev1.Event) error {
	return s.events.Create(ctx, ev)
}

func (s clientSink) patch(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := s.events.Patch(ctx, namespace, name, MergePatch, patch, PatchOptions{})
	return err
}

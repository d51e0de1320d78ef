package kctl

// An extra: EventRecorder, Kubernetes Events about objects, written in the
// background as one of the Manager's event writers.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EventRecorder returns a recorder of Kubernetes Events about objects,
// reported as coming from component (usually the controller's name).
// Events are written in the background while the Manager runs, on every
// replica; one recorder is shared per component. On shutdown the Events
// recorded until the other work has returned are written within
// ShutdownTimeout; any that are not are counted in kctl_events_dropped_total
// and logged.
func (m *Manager) EventRecorder(component string) *EventRecorder {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recorders[component].(*EventRecorder); ok {
		return r
	}
	r := newEventRecorder(m.conn, component, m.log)
	r.dropped = m.metrics.EventsDropped()
	if m.recorders == nil {
		m.recorders = map[string]any{}
	}
	m.recorders[component] = r
	// A runnable, not a loop over recorders in Start: programs without
	// Events do not link them.
	w := Runnable{
		Name: "events of " + component,
		Run: func(ctx context.Context) error {
			r.deliver(ctx, m.shutdown.writesBy)
			return nil
		},
	}
	switch {
	case m.ctx == nil:
		m.eventWriters = append(m.eventWriters, w)
	case m.ctx.Err() != nil:
		r.stop() // shutting down: nothing will write its Events
	default:
		runIn(m.eventGroup, m.eventCtx, w)
	}
	return r
}

// The recorder's limits; the first three and the cache size are
// client-go's (tools/record).
const (
	// Events per object and type before the limit applies
	eventBurst = 25
	// then one more Event per object and type per 5 minutes
	eventRefill = 5 * time.Minute
	// a repeat within 10 minutes of the last one is merged into it
	eventMergeWindow = 10 * time.Minute
	// Events waiting to be written; more are dropped
	eventBuffer = 1000
	// objects and Events remembered for the limit and for merging
	eventCacheSize = 4096
	// attempts per write while the API server is unreachable
	eventWriteTries = 3
)

// EventRecorder writes Kubernetes Events (core/v1) about objects, the ones
// kubectl describe shows:
//
//	rec := mgr.EventRecorder("widget-controller")
//	rec.Eventf(widget, corev1.EventTypeWarning, "BackendFailed", "backend %s: %v", host, err)
//
// Event never blocks: a writer run by the Manager sends the buffered Events;
// beyond a buffer of 1000 they are dropped. On shutdown the writer sends what
// is buffered within the Manager's ShutdownTimeout. Every Event not written
// (buffer full, write failed, not sent by the end of the shutdown, recorded
// after it) is counted in kctl_events_dropped_total and logged: a failed
// write each time, the other causes once per recorder. A repeat (same
// object, type, reason and message) within 10 minutes of the last is a PATCH
// of its count and lastTimestamp: a burst of 10 is one Event with count 10.
// Floods are limited per object and type as in client-go: a burst of 25
// Events, repeats included, then one per 5 minutes. The zero value is not
// usable (see Manager.EventRecorder); a nil *EventRecorder drops everything.
// It is safe for concurrent use.
type EventRecorder struct {
	component, host string
	log             *slog.Logger
	sink            eventSink
	// bounded, so Event never blocks; run names the Events
	queue chan *corev1.Event

	mu sync.Mutex // guards limits
	// by object and type; at most eventCacheSize
	limits map[eventKey]*tokenBucket

	// Events not written; the Manager's kctl_events_dropped_total,
	// shared by its recorders
	dropped *atomic.Uint64
	// Events dropped by the flood limit (by design, as client-go's)
	limited atomic.Uint64
	// a drop (other than a failed write) has been logged
	dropLogged atomic.Bool
	// guards stopped; held for reading while an Event is put in queue
	sendMu sync.RWMutex
	// deliver has returned: an Event is dropped at once
	stopped bool

	// Owned by deliver: the written Events, for merging, and the time in
	// the last Event's name, so names never repeat.
	seen     map[eventKey]*seenEvent
	lastName int64
}

// eventSink writes Events: the API server, or a fake in unit tests. create
// updates ev from the answer; patch sends a JSON merge patch.
type eventSink interface {
	create(ctx context.Context, ev *corev1.Event) error
	patch(ctx context.Context, namespace, name string, patch []byte) error
}

// eventKey identifies repeats of an Event; see eventKeyOf.
type eventKey struct {
	// UID, or kind/namespace/name for an object without one
	object               string
	typ, reason, message string
}

func eventKeyOf(e *corev1.Event) eventKey {
	o := e.InvolvedObject
	path := o.Kind + "/" + o.Namespace + "/" + o.Name
	object := cmp.Or(string(o.UID), path)
	return eventKey{object, e.Type, e.Reason, e.Message}
}

// seenEvent is an Event on the server that repeats merge into.
type seenEvent struct {
	namespace, name string
	count           int32
	last            time.Time
}

// newEventRecorder returns a recorder writing through conn as component (the
// Event's source and reportingComponent). Nothing is written until run.
func newEventRecorder(
	conn *Conn,
	component string,
	log *slog.Logger,
) *EventRecorder {
	host, _ := os.Hostname()
	r := &EventRecorder{
		component: component,
		host:      host,
		log:       cmp.Or(log, slog.Default()).With("component", component),
		queue:     make(chan *corev1.Event, eventBuffer),
		limits:    map[eventKey]*tokenBucket{},
		seen:      map[eventKey]*seenEvent{},
		dropped:   new(atomic.Uint64),
	}
	if conn != nil {
		r.sink = clientSink{NewClient[corev1.Event](conn)}
	}
	return r
}

// Event records an Event of eventType (corev1.EventTypeNormal or
// EventTypeWarning) about obj. reason is a short UpperCamelCase word for
// machines ("ScalingReplicaSet"); message is for humans. The object's kind
// comes from its Go type (see ResourceOf), else from its TypeMeta.
func (r *EventRecorder) Event(
	obj metav1.Object,
	eventType, reason, message string,
) {
	v := reflect.ValueOf(obj)
	nilPointer := v.Kind() == reflect.Pointer && v.IsNil()
	if r == nil || obj == nil || nilPointer {
		return
	}
	normal := eventType == corev1.EventTypeNormal
	warning := eventType == corev1.EventTypeWarning
	if !normal && !warning {
		r.log.Error("kctl: dropped an Event with an unsupported type: "+
			"use corev1.EventTypeNormal or EventTypeWarning",
			"type", eventType, "reason", reason,
			"object", obj.GetNamespace()+"/"+obj.GetName())
		return
	}
	ref := corev1.ObjectReference{
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
	}
	res, _, err := apitype.OfType(reflect.Indirect(v).Type())
	if err == nil {
		ref.APIVersion = res.APIVersion()
		ref.Kind = res.Kind
	} else if o, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		gvk := o.GetObjectKind().GroupVersionKind()
		ref.APIVersion, ref.Kind = gvk.ToAPIVersionAndKind()
	}
	now := metav1.Now()
	// The default namespace is for cluster-scoped objects.
	ns := cmp.Or(ref.Namespace, metav1.NamespaceDefault)
	e := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns},
		InvolvedObject:      ref,
		Type:                eventType,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Source:              corev1.EventSource{Component: r.component, Host: r.host},
		ReportingController: r.component,
		ReportingInstance:   r.host,
	}
	if !r.allow(eventKeyOf(e), now.Time) {
		r.limited.Add(1)
		return
	}
	r.sendMu.RLock()
	stopped := r.stopped
	queued := false
	if !stopped {
		select {
		case r.queue <- e:
			queued = true
		default:
		}
	}
	r.sendMu.RUnlock()
	switch {
	case stopped:
		r.drop(1, "kctl: Event recorded after the Manager stopped writing "+
			"Events, dropping it and any later ones (logged once)",
			"reason", reason)
	case !queued:
		r.drop(1, "kctl: Event buffer full, dropping Events (logged once): "+
			"the API server is slow or unreachable, or the Manager is not running",
			"buffer", eventBuffer, "reason", reason)
	}
}

// drop counts n Events as dropped and logs msg with attrs, if no drop has
// been logged before.
func (r *EventRecorder) drop(n int, msg string, attrs ...any) {
	total := r.dropped.Add(uint64(n))
	first := r.dropLogged.CompareAndSwap(false, true)
	if !first {
		return
	}
	attrs = append(attrs, "dropped", n, "droppedTotal", total)
	r.log.Warn(msg, attrs...)
}

// stop makes every later Event count as dropped: nothing will write it.
func (r *EventRecorder) stop() {
	r.sendMu.Lock()
	r.stopped = true
	r.sendMu.Unlock()
}

// Eventf is Event with a message formatted by fmt.Sprintf.
func (r *EventRecorder) Eventf(
	obj metav1.Object,
	eventType, reason, format string,
	args ...any,
) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// allow takes a token at now from the bucket of key's object and type.
func (r *EventRecorder) allow(key eventKey, now time.Time) bool {
	key = eventKey{object: key.object, typ: key.typ}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.limits[key]
	if b == nil {
		// A bucket that has refilled by now is full: forget those first.
		full := func(b *tokenBucket) bool {
			gained := float64(now.Sub(b.last)) / float64(eventRefill)
			return gained >= eventBurst-b.tokens
		}
		if len(r.limits) >= eventCacheSize {
			pruneLocked(r.limits, full)
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

func (b *tokenBucket) take(now time.Time) bool {
	if now.After(b.last) {
		gained := float64(now.Sub(b.last)) / float64(eventRefill)
		b.tokens = min(eventBurst, b.tokens+gained)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// pruneLocked deletes the entries of m that stale reports true for, then
// arbitrary ones until m is below eventCacheSize. The caller holds m's lock.
func pruneLocked[K comparable, V any](m map[K]V, stale func(V) bool) {
	maps.DeleteFunc(m, func(_ K, v V) bool { return stale(v) })
	tooMany := func(K, V) bool { return len(m) >= eventCacheSize }
	maps.DeleteFunc(m, tooMany) // len(m) falls as it deletes
}

// deliver writes the buffered Events until ctx ends, finishing a write under
// way, then what is left until flushBy() (called once ctx has ended); the
// Events still buffered then, and every later one, are counted as dropped and
// logged. Call it once (the Manager does).
// It is not named run: the Manager's type refers to *EventRecorder, and the
// linker keeps a method of such a type that matches a method called through
// an interface (the cache's run(ctx)), so every program would link Events.
func (r *EventRecorder) deliver(ctx context.Context, flushBy func() time.Time) {
	// Writes do not end with ctx: retries end after eventWriteTries.
	writeCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		select {
		case e := <-r.queue:
			r.write(writeCtx, e)
		case <-ctx.Done():
		}
	}
	flush, cancel := context.WithDeadline(writeCtx, flushBy())
	defer cancel()
	for flush.Err() == nil && len(r.queue) > 0 {
		r.write(flush, <-r.queue)
	}
	r.stop()
	n := len(r.queue) // none are added after stop
	for range n {
		<-r.queue
	}
	if n > 0 {
		r.dropped.Add(uint64(n))
		r.log.Warn("kctl: shutdown: Events not written in time (dropped)",
			"dropped", n,
			"droppedTotal", r.dropped.Load())
	}
}

// write sends e as a PATCH of the Event it repeats, or as a new Event named
// like client-go's: <object name>.<Unix nanoseconds, hex>. A failure is logged.
func (r *EventRecorder) write(ctx context.Context, e *corev1.Event) {
	key := eventKeyOf(e)
	at := e.FirstTimestamp.Time
	ref := e.InvolvedObject
	var err error
	defer func() {
		if err != nil {
			// A collision or a namespace going away: nothing to do.
			terminating := corev1.NamespaceTerminatingCause
			quiet := apierrors.IsAlreadyExists(err) ||
				apierrors.HasStatusCause(err, terminating)
			level := slog.LevelError
			if quiet {
				level = slog.LevelDebug
			}
			r.dropped.Add(1)
			object := ref.Namespace + "/" + ref.Name
			r.log.Log(ctx, level, "kctl: could not write Event (dropped): "+
				"check the API server and RBAC: create and patch on events",
				"err", err, "object", strings.TrimPrefix(object, "/"),
				"kind", ref.Kind, "reason", e.Reason)
		}
	}()
	prev := r.seen[key]
	if prev != nil && at.Sub(prev.last) < eventMergeWindow {
		prev.count++
		prev.last = at
		change := map[string]any{
			"count":         prev.count,
			"lastTimestamp": e.LastTimestamp,
		}
		patch, _ := json.Marshal(change)
		// NotFound: the Event expired (the API server's --event-ttl), so
		// write a new one.
		err = r.retry(ctx, func() error {
			return r.sink.patch(ctx, prev.namespace, prev.name, patch)
		})
		if !apierrors.IsNotFound(err) {
			return
		}
	}
	// Two Events in one clock tick get names one nanosecond apart.
	r.lastName = max(at.UnixNano(), r.lastName+1)
	e.Name = fmt.Sprintf("%s.%x", ref.Name, r.lastName)
	create := func() error { return r.sink.create(ctx, e) }
	err = r.retry(ctx, create)
	if err != nil {
		return
	}
	if len(r.seen) >= eventCacheSize {
		expired := func(s *seenEvent) bool {
			return at.Sub(s.last) >= eventMergeWindow
		}
		pruneLocked(r.seen, expired)
	}
	r.seen[key] = &seenEvent{
		namespace: e.Namespace,
		name:      e.Name,
		count:     1,
		last:      at,
	}
}

// retry calls write up to eventWriteTries times while the failure is
// transient (the API server unreachable, overloaded or timing out), waiting
// 1s, then 2s between tries.
func (r *EventRecorder) retry(ctx context.Context, write func() error) error {
	err := write()
	for try := 1; try < eventWriteTries; try++ {
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * time.Second):
		}
		err = write()
	}
	return err
}

func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		canceled := errors.Is(err, context.Canceled)
		timedOut := errors.Is(err, context.DeadlineExceeded)
		return !canceled && !timedOut
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err)
}

// clientSink writes through kctl's own client.
type clientSink struct{ c *Client[corev1.Event] }

func (s clientSink) create(ctx context.Context, e *corev1.Event) error {
	return s.c.Create(ctx, e)
}

func (s clientSink) patch(
	ctx context.Context,
	namespace, name string,
	patch []byte,
) error {
	_, err := s.c.patch(ctx, namespace, name,
		MergePatch, patch, PatchOptions{})
	return err
}

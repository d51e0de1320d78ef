package kctl

// An extra: EventRecorder, Kubernetes Events about objects, written in the
// background as one of the Manager's event writers (what is a repeat, the
// flood limit and the merging are internal/events); and its user in the
// reconcile chain, a Warning Event on an object whose reconcile keeps
// failing (WarnAfterFailures), so that kubectl describe says why it is
// not reconciled, or whose retries have run out (WithMaxRetries).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/events"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			r.deliver(ctx, m.schedule.WritesBy)
			return nil
		},
	}
	if m.ctx != nil && m.ctx.Err() != nil {
		r.stop() // shutting down: nothing will write its Events
		return r
	}
	m.writers.Go(w.task()) // at once from Start on
	return r
}

// The recorder's limits beside internal/events' (its flood limit and
// merge window).
const (
	// Events waiting to be written; more are dropped
	eventBuffer = 1000
)

// EventRecorder writes Kubernetes Events about objects, the ones kubectl
// describe shows: events.k8s.io/v1 Events, or core/v1 ones from the first
// write the server refuses because it does not serve that group or RBAC
// does not let the program write there (logged once). RBAC: create and
// patch on events in groups "" and events.k8s.io.
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
// object, related object, type, reason, action and message) within 10
// minutes of the last is a PATCH of its series (core/v1: its count and
// lastTimestamp): a burst of 10 is one Event with count 10.
// Floods are limited per object and type as in client-go: a burst of 25
// Events, repeats included, then one per 5 minutes. The zero value is not
// usable (see Manager.EventRecorder); a nil *EventRecorder drops everything.
// It is safe for concurrent use.
type EventRecorder struct {
	component, host string
	log             *slog.Logger
	sink            events.Sink
	// bounded, so Event never blocks; run names the Events
	queue chan *corev1.Event

	// the flood limit per object and type
	limits *events.Limiter

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

	// Owned by deliver: the written Events, for merging, and their names.
	written *events.Written
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
		limits:    events.NewLimiter(),
		written:   events.NewWritten(),
		dropped:   new(atomic.Uint64),
	}
	if conn != nil {
		Declare[events.V1Event](Resource{
			Group:      "events.k8s.io",
			Version:    "v1",
			Kind:       "Event",
			Namespaced: true,
		})
		r.sink = &clientSink{
			core: NewClient[corev1.Event](conn),
			v1:   NewClient[events.V1Event](conn),
			log:  r.log,
		}
	}
	return r
}

// Event records an Event of eventType (corev1.EventTypeNormal or
// EventTypeWarning) about obj. reason is a short UpperCamelCase word for
// machines ("ScalingReplicaSet"), which is also its action; message is
// for humans. The object's kind comes from its Go type (see ResourceOf),
// else from its TypeMeta.
func (r *EventRecorder) Event(
	obj metav1.Object,
	eventType, reason, message string,
) {
	r.EventRelated(obj, nil, eventType, reason, reason, message)
}

// EventRelated is Event with the two fields events.k8s.io/v1 adds:
// action, what was done or failed ("Scale", "Bind"), and related, a
// second object the Event is about (nil: none), e.g. the Pod a
// ReplicaSet's Event made:
//
//	rec.EventRelated(rs, pod, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created pod "+pod.Name)
//
// Written as a core/v1 Event (see EventRecorder), they are its action and
// related fields too.
func (r *EventRecorder) EventRelated(
	obj, related metav1.Object,
	eventType, reason, action, note string,
) {
	ref, ok := events.Reference(obj)
	if r == nil || !ok {
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
	now := metav1.Now()
	// The default namespace is for cluster-scoped objects.
	ns := cmp.Or(ref.Namespace, metav1.NamespaceDefault)
	e := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns},
		InvolvedObject:      ref,
		Type:                eventType,
		Reason:              reason,
		Action:              action,
		Message:             note,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Source:              corev1.EventSource{Component: r.component, Host: r.host},
		ReportingController: r.component,
		ReportingInstance:   r.host,
	}
	relatedRef, ok := events.Reference(related)
	if ok {
		e.Related = &relatedRef
	}
	if !r.limits.Allow(events.KeyOf(e), now.Time) {
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

// write writes e (events.Written.Write). A failure is logged and counted.
func (r *EventRecorder) write(ctx context.Context, e *corev1.Event) {
	err := r.written.Write(ctx, r.sink, e)
	if err == nil {
		return
	}
	level := slog.LevelError
	if events.Quiet(err) {
		level = slog.LevelDebug
	}
	r.dropped.Add(1)
	ref := e.InvolvedObject
	object := ref.Namespace + "/" + ref.Name
	r.log.Log(ctx, level, "kctl: could not write Event (dropped): "+
		"check the API server and RBAC: create and patch on events",
		"err", err, "object", strings.TrimPrefix(object, "/"),
		"kind", ref.Kind, "reason", e.Reason)
}

// clientSink writes through kctl's own client: events.k8s.io/v1 Events,
// or core/v1 ones from the first write the API server refuses because it
// does not serve that group or RBAC does not let this program write there
// (client-go's events adapter also falls back to core/v1).
type clientSink struct {
	core *Client[corev1.Event]
	v1   *Client[events.V1Event]
	log  *slog.Logger
	// coreOnly is set at that refusal, once, and logged
	coreOnly atomic.Bool
}

func (s *clientSink) Create(ctx context.Context, e *corev1.Event) error {
	if !s.coreOnly.Load() {
		err := s.v1.Create(ctx, events.V1(e))
		if !s.fallBack(err) {
			return err
		}
	}
	return s.core.Create(ctx, e)
}

func (s *clientSink) Repeat(ctx context.Context, namespace, name string, count int32, last time.Time) error {
	var err error
	if s.coreOnly.Load() {
		_, err = s.core.patch(ctx, namespace, name, MergePatch, events.CountPatch(count, last), PatchOptions{})
	} else {
		_, err = s.v1.patch(ctx, namespace, name, MergePatch, events.SeriesPatch(count, last), PatchOptions{})
	}
	return err
}

// fallBack reports whether err is a refusal to write events.k8s.io/v1
// Events, and if so turns coreOnly on: logged once, at info for a server
// that does not serve the group, as a warning for RBAC.
func (s *clientSink) fallBack(err error) bool {
	terminating := apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
	forbidden := apierrors.IsForbidden(err) && !terminating
	notServed := errors.Is(err, ErrNotInstalled)
	if !forbidden && !notServed {
		return false
	}
	if !s.coreOnly.CompareAndSwap(false, true) {
		return true
	}
	if forbidden {
		s.log.Warn("kctl: writing core/v1 Events from now on: RBAC refuses events.k8s.io/v1 "+
			"(grant create and patch on events in group events.k8s.io to write there)", "err", err)
	} else {
		s.log.Info("kctl: writing core/v1 Events from now on: the API server does not serve events.k8s.io/v1")
	}
	return true
}

// WarnAfterFailures records a Warning Event (reason ReconcileFailed,
// naming the error) on the object of a key whose reconcile has failed n
// times in a row, and on each failure after, which rec merges into one
// Event with a count while the error reads the same:
//
//	c.WarnAfterFailures(mgr.EventRecorder("podcount"), 5)
//
// A Terminal error counts, and ends the run of failures (it is not
// retried). A key whose object is not in the cache gets no Event.
// Defaults to none: no Events about failures. n must be at least 1.
func (c *Controller[T]) WarnAfterFailures(rec *EventRecorder, n int) *Controller[T] {
	if n < 1 || rec == nil {
		c.host.misuse(fmt.Errorf("kctl: controller %q: "+
			"WarnAfterFailures(%d) needs a recorder and n >= 1",
			c.name, n))
		return c
	}
	warn := func(k Key, attempt int, err error) {
		if attempt < n || c.informer == nil {
			return
		}
		obj, ok := c.informer.Get(k.Namespace, k.Name)
		if !ok {
			return
		}
		msg := fmt.Sprintf("reconcile failed %d or more times "+
			"in a row: %v", n, err)
		rec.Event(metaOf(obj), corev1.EventTypeWarning,
			"ReconcileFailed", msg)
	}
	step := middleware[*T]{name: "WarnAfterFailures", rank: rankReport, wrap: func(next reconcileFunc[*T]) reconcileFunc[*T] {
		return func(ctx context.Context, k Key, obj *T) (Result, error) {
			res, err := next(ctx, k, obj)
			if err != nil {
				t, _ := TriggerFrom(ctx)
				warn(k, t.Attempt, err)
			}
			return res, err
		}
	}}
	return c.configure("WarnAfterFailures", func() { c.use(step) })
}

// WithMaxRetries gives up on a key whose reconcile has failed n times in
// a row: the n-th failure becomes Terminal (logged, counted, not retried;
// see Controller's contract), and rec, if not nil, records a Warning
// Event (reason ReconcileGaveUp, naming the error) on the key's object:
//
//	c.WithMaxRetries(10, mgr.EventRecorder("podcount"))
//
// Every error counts: a Conflict, a timeout (WithReconcileTimeout), a
// panic. A key given up on is reconciled again when it is next queued (a
// change of its object, an event of a source, a resync, Enqueue), with a
// fresh count. Defaults to 0: retried for ever with the key's backoff
// (see WithRateLimiter), as controller-runtime does.
func (c *Controller[T]) WithMaxRetries(n int, rec *EventRecorder) *Controller[T] {
	if n < 1 {
		c.host.misuse(fmt.Errorf("kctl: controller %q: "+
			"WithMaxRetries(%d) must be at least 1", c.name, n))
		return c
	}
	step := middleware[*T]{name: "WithMaxRetries", rank: rankReport, wrap: func(next reconcileFunc[*T]) reconcileFunc[*T] {
		return func(ctx context.Context, k Key, obj *T) (Result, error) {
			res, err := next(ctx, k, obj)
			t, _ := TriggerFrom(ctx)
			if err == nil || errors.Is(err, ErrTerminal) || t.Attempt < n {
				return res, err
			}
			err = fmt.Errorf("kctl: gave up on %s %s after %d failures "+
				"in a row (WithMaxRetries(%d)): %w",
				c.res.Kind, k, t.Attempt, n, unprefixed(err))
			if rec != nil && c.informer != nil {
				cached, ok := c.informer.Get(k.Namespace, k.Name)
				if ok {
					rec.Event(metaOf(cached), corev1.EventTypeWarning,
						"ReconcileGaveUp", err.Error())
				}
			}
			return res, Terminal(err)
		}
	}}
	return c.configure("WithMaxRetries", func() { c.use(step) })
}

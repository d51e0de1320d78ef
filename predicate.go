package kctl

// What a source's events look like to a filter (ObjectEvent, Predicate),
// and why a key is queued (Trigger); the informer events a source passes
// on (live) or replays at each run (replay), and the key of an object of
// the controller's own type (ownKeys).

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectEvent is the untyped view of an Event that predicates see, so one
// predicate serves every source. Old is nil except for updates.
type ObjectEvent struct {
	Type     EventType
	Object   metav1.Object
	Old      metav1.Object
	Initial  bool
	Resync   bool
	Relisted bool
}

// objectEvent is ev, an event of the core over P = *T, as predicates see it.
func objectEvent[P any](ev event[P]) ObjectEvent {
	oe := ObjectEvent{
		Type:     ev.Type,
		Object:   metaOf(ev.Object),
		Initial:  ev.Initial,
		Resync:   ev.Resync,
		Relisted: ev.Relisted,
	}
	if !isNil(ev.Old) {
		oe.Old = metaOf(ev.Old)
	}
	return oe
}

// Predicate decides whether an event enqueues keys. The built-in ones pass
// every event that is not an update, and an update only if its kind of change
// happened:
//
//	c.WithPredicates(kctl.GenerationChanged) // ignore status-only updates
type Predicate func(ObjectEvent) bool

// Trigger says why a reconcile runs. TriggerFrom(ctx) returns it inside reconcile.
type Trigger struct {
	// Cause is one of: initial (the first list), created, updated, deleted,
	// resync, owned (a child of type Owns changed), mapped (Watches), channel
	// (FromChannel), manual (Enqueue), requeue-after, retry, or delayed (a
	// retry or requeue-after whose key an event had already brought back).
	// An event that queues a key while it waits for a retry or a
	// requeue-after is the cause of the next reconcile, not the wait.
	Cause string
	// Detail adds what changed: for updated the kinds of change ("spec
	// labels"), for owned and mapped the object ("Pod ns/web-1 Updated"), for
	// retry the count.
	Detail string
	// Merged counts further causes that arrived while the key was queued.
	Merged int
	// Waited is the time from the first cause to the start of this
	// reconcile; for retry and requeue-after, from when it was asked for.
	Waited time.Duration
	// Attempt is 1, or 1 + the key's consecutive failures.
	Attempt int
	queued  time.Time
	// low queues the key at low priority (EnqueueWithPriority; for
	// events, the controller's lowIf).
	low bool
	// keep keeps the cause while the controller does not run (Enqueue,
	// FromChannel): no replay can recreate it.
	keep bool
	// gone is the last state of the object (a P) when a delete queued
	// the key, for OnDelete; nil otherwise.
	gone any
	// again is closed when the key is queued again while this reconcile
	// runs (QueuedAgain); set by processNext.
	again chan struct{}
}

// merge folds a later cause of t's key into t, the first: counted in
// Merged, and a delete's object kept in gone, the last state (OnDelete).
func (t *Trigger) merge(later Trigger) {
	t.Merged++
	if later.gone != nil {
		t.gone = later.gone
	}
}

// triggerKey is the context key of a reconcile's Trigger (handle puts
// it there): TriggerFrom (controller_options.go) reads it.
type triggerKey struct{}

// live passes on the events of a running informer except those of its first
// list: each run's replay hands the controller every cached object anyway,
// and the first list's events may still be on their way when it does.
func live[P any](handle func(event[P])) func(event[P]) {
	return func(ev event[P]) {
		if !ev.Initial {
			handle(ev)
		}
	}
}

// replay returns a function that hands cached objects to handle as
// initial Added events: how a new run learns what happened while it was
// not running. Called with a nil match, it hands every one; else only
// those with a key (keys, the keys handle queues for it) that match
// takes, e.g. the keys of the ranges a shard member gained (handle then
// queues all of that object's keys).
func replay[P any](
	inf *informer[P],
	keys func(obj P) []Key,
	handle func(event[P]),
) replayFunc {
	return func(match func(Key) bool) {
		all, _ := inf.List(ListOptions{}) // no selector: no error
		for _, obj := range all {
			if match != nil && !slices.ContainsFunc(keys(obj), match) {
				continue
			}
			handle(event[P]{Type: Added, Object: obj, Initial: true})
		}
	}
}

// replayFunc is what replay returns: a nil match replays every object.
type replayFunc func(match func(Key) bool)

// ownKeys is the key of obj itself: what a controller queues for an
// object of its own type.
func ownKeys[P any](obj P) []Key {
	m := metaOf(obj)
	return []Key{{Namespace: m.GetNamespace(), Name: m.GetName()}}
}

package kctl

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectEvent is the untyped view of an Event that predicates see, so one
// predicate serves every source. Old is nil except for updates.
type ObjectEvent struct {
	Type                      EventType
	Object, Old               metav1.Object
	Initial, Resync, Relisted bool
}

func objectEvent[T any](ev Event[T]) ObjectEvent {
	oe := ObjectEvent{Type: ev.Type, Object: metaOf(ev.Object), Initial: ev.Initial, Resync: ev.Resync, Relisted: ev.Relisted}
	if ev.Old != nil {
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

var (
	// GenerationChanged passes updates that changed metadata.generation (the spec).
	GenerationChanged Predicate = updatedOnly(func(o, n metav1.Object) bool { return o.GetGeneration() != n.GetGeneration() })
	// LabelsChanged passes updates that changed the labels.
	LabelsChanged Predicate = updatedOnly(func(o, n metav1.Object) bool { return !maps.Equal(o.GetLabels(), n.GetLabels()) })
	// AnnotationsChanged passes updates that changed the annotations.
	AnnotationsChanged Predicate = updatedOnly(func(o, n metav1.Object) bool { return !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) })
	// ResourceVersionChanged passes updates that changed anything, dropping resyncs.
	ResourceVersionChanged Predicate = updatedOnly(func(o, n metav1.Object) bool { return o.GetResourceVersion() != n.GetResourceVersion() })
)

func updatedOnly(changed func(old, cur metav1.Object) bool) Predicate {
	return func(e ObjectEvent) bool { return e.Type != Updated || e.Old == nil || changed(e.Old, e.Object) }
}

// Or passes an event that any of preds passes.
func Or(preds ...Predicate) Predicate {
	return func(e ObjectEvent) bool {
		return slices.ContainsFunc(preds, func(p Predicate) bool { return p(e) })
	}
}

// Trigger says why a reconcile runs. TriggerFrom(ctx) returns it inside reconcile.
type Trigger struct {
	// Cause is one of: initial (the first list), created, updated, deleted,
	// resync, owned (a child of type Owns changed), mapped (Watches), channel
	// (FromChannel), manual (Enqueue), requeue-after, retry, or delayed (a
	// retry or requeue-after whose key an event had already brought back).
	Cause string
	// Detail adds what changed: for updated the kinds of change ("spec labels"),
	// for owned and mapped the object ("Pod ns/web-1 Updated"), for retry the count.
	Detail  string
	Merged  int           // further causes that arrived while the key was queued
	Waited  time.Duration // time from the first cause to the start of this reconcile
	Attempt int           // 1, or 1 + the key's consecutive failures
	queued  time.Time
}

type triggerKey struct{}

// TriggerFrom returns the Trigger of the reconcile running with ctx.
func TriggerFrom(ctx context.Context) (Trigger, bool) {
	t, ok := ctx.Value(triggerKey{}).(Trigger)
	return t, ok
}

// changes names the kinds of change between two versions of an object.
func changes(old, cur metav1.Object) string {
	var kinds []string
	if old.GetGeneration() != cur.GetGeneration() {
		kinds = append(kinds, "spec")
	}
	if !maps.Equal(old.GetLabels(), cur.GetLabels()) {
		kinds = append(kinds, "labels")
	}
	if !maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) {
		kinds = append(kinds, "annotations")
	}
	if !slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) {
		kinds = append(kinds, "finalizers")
	}
	if old.GetDeletionTimestamp() == nil && cur.GetDeletionTimestamp() != nil {
		kinds = append(kinds, "deleting")
	}
	if len(kinds) == 0 {
		kinds = append(kinds, "status or other fields")
	}
	return strings.Join(kinds, " ")
}

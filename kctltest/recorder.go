package kctltest

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FakeRecorder stands in for a *kctl.EventRecorder in a unit test: it has
// its Event, Eventf and EventRelated methods, with the same signatures, and keeps what
// they record, for the test to read with Events. A reconcile function that
// takes a small interface of its own gets either:
//
//	type recorder interface {
//		Eventf(obj metav1.Object, eventType, reason, format string, args ...any)
//	}
//
//	rec := &kctltest.FakeRecorder{}
//	reconcile(widgets, rec)(ctx, w)
//	if got := rec.Events(); len(got) != 1 || got[0].Reason != "Ready" { ... }
//
// It models no rate limit, aggregation or API write: test those with
// Start. The zero value is ready to use, and safe for concurrent use.
type FakeRecorder struct {
	mu     sync.Mutex
	events []RecordedEvent
}

// RecordedEvent is one Event a FakeRecorder recorded.
type RecordedEvent struct {
	Namespace, Name string // the object's
	Kind            string // the object's Go type, e.g. "Pod" (its TypeMeta's kind when set)
	Type            string // "Normal" or "Warning"
	Reason, Message string
	Action          string // EventRelated's; Event's is its reason
	// Related names EventRelated's related object, "kind ns/name"; "" for none
	Related string
}

// String is the Event as one line: "Warning Failed ns/name: message".
func (e RecordedEvent) String() string {
	return fmt.Sprintf("%s %s %s/%s: %s", e.Type, e.Reason, e.Namespace, e.Name, e.Message)
}

// Event records an Event about obj; a nil obj records nothing, as
// kctl.EventRecorder drops it.
func (r *FakeRecorder) Event(obj metav1.Object, eventType, reason, message string) {
	r.EventRelated(obj, nil, eventType, reason, reason, message)
}

// EventRelated records an Event about obj with an action and a related
// object (nil: none), as kctl.EventRecorder's EventRelated.
func (r *FakeRecorder) EventRelated(obj, related metav1.Object, eventType, reason, action, note string) {
	if obj == nil || isNilPointer(obj) {
		return
	}
	e := RecordedEvent{Namespace: obj.GetNamespace(), Name: obj.GetName(), Kind: kindName(obj),
		Type: eventType, Reason: reason, Message: note, Action: action}
	if related != nil && !isNilPointer(related) {
		e.Related = kindName(related) + " " + related.GetNamespace() + "/" + related.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Eventf is Event with a message formatted by fmt.Sprintf.
func (r *FakeRecorder) Eventf(obj metav1.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// Events returns a copy of the Events recorded, oldest first.
func (r *FakeRecorder) Events() []RecordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// isNilPointer tells whether v is a typed nil pointer.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// kindName is obj's kind: its TypeMeta's when set, else its Go type's name.
func kindName(obj any) string {
	if k, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		if kind := k.GetObjectKind().GroupVersionKind().Kind; kind != "" {
			return kind
		}
	}
	return derefType(reflect.TypeOf(obj)).Name()
}

package events

import (
	"context"
	"reflect"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Sink writes Events: the API server, or a fake in tests. Create writes a
// new Event; Repeat makes the Event namespace/name count repeats, the last
// at last.
type Sink interface {
	Create(ctx context.Context, ev *corev1.Event) error
	Repeat(ctx context.Context, namespace, name string, count int32, last time.Time) error
}

// WriteTries is the attempts per write while the API server is unreachable.
const WriteTries = 3

// Write sends e through sink as a repeat of the Event it repeats (Repeat),
// or as a new Event named like client-go's (Name), and remembers it for
// the next repeats. A repeat of an Event that expired (the API server's
// --event-ttl) is written as a new Event. It returns the failure of the
// last try (see Retry).
func (w *Written) Write(ctx context.Context, sink Sink, e *corev1.Event) error {
	key := KeyOf(e)
	at := e.FirstTimestamp.Time
	ns, name, count, repeat := w.Repeat(key, at)
	if repeat {
		err := Retry(ctx, func() error {
			return sink.Repeat(ctx, ns, name, count, e.LastTimestamp.Time)
		})
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	e.Name = w.Name(e.InvolvedObject.Name, at)
	err := Retry(ctx, func() error { return sink.Create(ctx, e) })
	if err != nil {
		return err
	}
	w.Remember(key, e.Namespace, e.Name, at)
	return nil
}

// Retry calls write up to WriteTries times while the failure is transient
// (the API server unreachable, overloaded or timing out), waiting 1s, then
// 2s between tries, and returns the last failure.
func Retry(ctx context.Context, write func() error) error {
	err := write()
	for try := 1; try < WriteTries; try++ {
		if err == nil || !Transient(err) {
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

// Quiet reports whether a write that failed with err needs no one's
// attention: a name collision, or a namespace going away.
func Quiet(err error) bool {
	terminating := corev1.NamespaceTerminatingCause
	return apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, terminating)
}

// Reference is a reference to obj, its kind from its Go type (see
// apitype.OfType), else from its TypeMeta; false if obj is nil or a nil
// pointer.
func Reference(obj metav1.Object) (corev1.ObjectReference, bool) {
	v := reflect.ValueOf(obj)
	if obj == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return corev1.ObjectReference{}, false
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
	return ref, true
}

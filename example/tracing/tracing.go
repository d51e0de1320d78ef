package main

import (
	"context"

	"github.com/kctl-dev/kctl"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TraceparentAnnotation holds a W3C trace context ("00-<trace id>-<span
// id>-01") that the tool which made or changed an object can set: the
// spans of the object's reconciles then join that trace.
const TraceparentAnnotation = "tracing.kctl.dev/traceparent"

// Spans is a reconcile middleware (kctl.Controller.WithMiddleware) that
// makes one span per reconcile of controller, named "reconcile
// <controller>", with the key, the trigger and the attempt as attributes
// and the reconcile's error as the span's status:
//
//	c.WithMiddleware(Spans[corev1.ConfigMap](tracer, "keycount"))
//
// The reconcile's context carries the span, so spans the reconcile starts
// (and a client instrumented with OpenTelemetry) are its children. An
// object whose TraceparentAnnotation holds a trace context gets its
// reconcile's span in that trace, as a child of the span it names.
func Spans[T any, PT interface {
	*T
	metav1.Object
}](tracer trace.Tracer, controller string) func(kctl.ReconcileFunc[T]) kctl.ReconcileFunc[T] {
	return func(next kctl.ReconcileFunc[T]) kctl.ReconcileFunc[T] {
		return func(ctx context.Context, k kctl.Key, obj *T) (kctl.Result, error) {
			if obj != nil { // nil: the object is gone
				parent := PT(obj).GetAnnotations()[TraceparentAnnotation]
				carrier := propagation.MapCarrier{"traceparent": parent}
				ctx = propagation.TraceContext{}.Extract(ctx, carrier)
			}
			t, _ := kctl.TriggerFrom(ctx)
			attrs := trace.WithAttributes(
				attribute.String("k8s.namespace.name", k.Namespace),
				attribute.String("kctl.key.name", k.Name),
				attribute.String("kctl.trigger", t.Cause),
				attribute.Int("kctl.attempt", t.Attempt),
			)
			ctx, span := tracer.Start(ctx, "reconcile "+controller, attrs)
			defer span.End()
			res, err := next(ctx, k, obj)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			return res, err
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// spanLine is what the test compares of a span: its name, key, trigger,
// attempt and status, e.g. "reconcile keycount plain new 1 Unset". The
// trigger of an object's first reconcile is "new": "initial" if the cache's
// first list found it, "created" if its watch did, whichever came first.
func spanLine(s sdktrace.ReadOnlySpan) string {
	attrs := map[attribute.Key]string{}
	for _, a := range s.Attributes() {
		attrs[a.Key] = a.Value.Emit()
	}
	trigger := attrs["kctl.trigger"]
	if trigger == "initial" || trigger == "created" {
		trigger = "new"
	}
	return fmt.Sprintf("%s %s %s %s %s", s.Name(), attrs["kctl.key.name"], trigger, attrs["kctl.attempt"], s.Status().Code)
}

// The keycount controller against the real API server: each reconcile is a
// span naming its key, trigger and attempt; an object annotated with a
// trace context has its spans in that trace; a failed attempt's span
// carries the error, and its retry is attempt 2.
func TestSpans_OnePerReconcile_InTheObjectsTrace(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	failedOnce := false
	opts := kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		setup(mgr, tracer)
		// flaky fails its first attempt at each ConfigMap named flaky.
		flaky := kctl.NewController(mgr, "flaky", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
			if cm.Name != "flaky" || failedOnce {
				return kctl.Result{}, nil
			}
			failedOnce = true // one worker: reconciles of flaky never overlap
			return kctl.Result{}, errors.New("the first attempt fails")
		})
		flaky.WithMiddleware(Spans[corev1.ConfigMap](tracer, "flaky"))
	})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parentID = "00f067aa0ba902b7"
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}, Data: map[string]string{"a": "1", "b": "2"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "traced", Annotations: map[string]string{
			TraceparentAnnotation: "00-" + traceID + "-" + parentID + "-01"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flaky"}},
	} {
		if err := cms.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	// ended returns the lines of the ended spans of key name, in order.
	ended := func(name string) []string {
		var lines []string
		for _, s := range spans.Ended() {
			line := spanLine(s)
			if strings.Fields(line)[2] == name {
				lines = append(lines, line)
			}
		}
		return lines
	}
	kctltest.Eventually(t, "plain labelled key-count=2, and its spans", func() string {
		cm, err := cms.Get(t.Context(), ns, "plain")
		if err != nil || cm.Labels["key-count"] != "2" {
			return fmt.Sprintf("labels %v, %v", cm.GetLabels(), err)
		}
		lines := ended("plain")
		for _, want := range []string{"reconcile keycount plain new 1 Unset", "reconcile flaky plain new 1 Unset"} {
			if !slices.Contains(lines, want) {
				return fmt.Sprintf("spans %q, none is %q", lines, want)
			}
		}
		return ""
	})
	kctltest.Eventually(t, "flaky's failed attempt and its retry", func() string {
		lines := ended("flaky")
		var ofFlaky []string
		for _, l := range lines {
			if strings.HasPrefix(l, "reconcile flaky ") {
				ofFlaky = append(ofFlaky, l)
			}
		}
		// The retry's trigger is "retry", or "updated" if keycount's label
		// on flaky queued the key first (an event wins over a wait).
		if len(ofFlaky) < 2 || ofFlaky[0] != "reconcile flaky flaky new 1 Error" || !strings.HasSuffix(ofFlaky[1], " 2 Unset") {
			return fmt.Sprintf("spans %q, want a failed attempt 1, then a good attempt 2", ofFlaky)
		}
		return ""
	})
	kctltest.Eventually(t, "traced's span in the trace its annotation names", func() string {
		for _, s := range spans.Ended() {
			if s.Name() != "reconcile keycount" || spanLine(s) != "reconcile keycount traced new 1 Unset" {
				continue
			}
			if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parentID {
				return fmt.Sprintf("its span is in trace %s under %s, want %s under %s",
					s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, parentID)
			}
			return ""
		}
		return fmt.Sprintf("no span of its first reconcile in %q", ended("traced"))
	})
	for _, s := range spans.Ended() {
		if spanLine(s) == "reconcile flaky flaky new 1 Error" {
			if got := s.Status().Description; got != "the first attempt fails" {
				t.Errorf("the failed attempt's span has status %q, want the reconcile's error", got)
			}
		}
		if strings.Fields(spanLine(s))[2] == "plain" && s.SpanContext().TraceID().String() == traceID {
			t.Errorf("plain, which has no annotation, has a span in the annotated object's trace")
		}
	}
}

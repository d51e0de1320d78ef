// Command tracing shows a reconcile middleware: every reconcile of its
// controller is an OpenTelemetry span (tracing.go), printed to standard
// output. The controller labels each ConfigMap with its number of keys
// (key-count). It is a module of its own, so that OpenTelemetry never
// enters kctl's go.mod; kctl depends on no tracing library, and a
// middleware is how any of them joins.
//
//	go run . --kubeconfig ~/.kube/config
//	kubectl create configmap demo --from-literal=a=1 \
//	  && kubectl annotate configmap demo tracing.kctl.dev/traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kbflags"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	f := kbflags.Register(flag.CommandLine, "run the controller only on the replica holding the Lease tracing")
	flag.Parse()
	log, err := f.Logger(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	exporter, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
	if err != nil {
		log.Error("tracing stopped", "err", err)
		os.Exit(1)
	}
	spans := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	mgr, err := kctl.NewManager(f.Options(log)) // --kubeconfig, --context
	if err == nil {
		err = f.Serve(mgr, kctl.LeaderElection{Name: "tracing"}) // metrics, probes, leader election as asked
	}
	if err == nil {
		setup(mgr, spans.Tracer("tracing"))
		err = mgr.Start(kctl.SignalContext()) // until SIGINT or SIGTERM
	}
	spans.Shutdown(context.Background()) // writes the spans still batched
	if err != nil {
		log.Error("tracing stopped", "err", err)
		os.Exit(1)
	}
}

// setup adds the keycount controller, with a span per reconcile, to mgr;
// the test calls it too.
func setup(mgr *kctl.Manager, tracer trace.Tracer) {
	cms := kctl.ClientFor[corev1.ConfigMap](mgr)
	c := kctl.NewController(mgr, "keycount", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
		want := strconv.Itoa(len(cm.Data))
		if cm.Labels["key-count"] == want {
			return kctl.Result{}, nil
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{"key-count":%q}}}`, want)
		return kctl.Result{}, cms.Patch(ctx, cm, kctl.MergePatch, []byte(patch), kctl.PatchOptions{})
	})
	c.WithMiddleware(Spans[corev1.ConfigMap](tracer, "keycount"))
}

// Command controllerruntime is the podcount controller written with
// controller-runtime's builder: it labels every ReplicaSet with
// pod-count=<n>, n being the number of Pods in the cache that match the
// ReplicaSet's selector, and writes only when the label changes.
//
//	controllerruntime --kubeconfig FILE [--qps 500] [--workers 2]
//
// Everything not set by a flag is controller-runtime's default, except that
// the metrics server is off (as kctl's is by default) and logs go to slog.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// --kubeconfig is registered by controller-runtime's config package.
	qps := flag.Float64("qps", 0, "client QPS (burst = QPS); 0 keeps controller-runtime's default (no client-side limit)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	workers := flag.Int("workers", 2, "concurrent reconciles")
	flag.Parse()
	if *cpuprofile != "" {
		stop := startProfile(*cpuprofile)
		defer stop()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(log, err)
	}
	if *qps > 0 {
		cfg.QPS, cfg.Burst = float32(*qps), int(*qps)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fail(log, err)
	}
	r := &reconciler{c: mgr.GetClient()}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("podcount").
		For(&appsv1.ReplicaSet{}).
		Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(r)
	if err != nil {
		fail(log, err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(log, err)
	}
}

type reconciler struct{ c client.Client }

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rs appsv1.ReplicaSet
	if err := r.c.Get(ctx, req.NamespacedName, &rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return ctrl.Result{}, nil // an invalid selector does not heal by retrying
	}
	var pods corev1.PodList
	if err := r.c.List(ctx, &pods, client.InNamespace(rs.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return ctrl.Result{}, err
	}
	n := strconv.Itoa(len(pods.Items))
	if rs.Labels["pod-count"] == n {
		return ctrl.Result{}, nil
	}
	if rs.Labels == nil {
		rs.Labels = map[string]string{}
	}
	rs.Labels["pod-count"] = n
	if err := r.c.Update(ctx, &rs); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// startProfile starts a CPU profile into path and returns what ends it.
func startProfile(path string) func() {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		slog.Error("cannot profile", "err", err)
		os.Exit(1)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func fail(log *slog.Logger, err error) {
	log.Error("podcount failed", "err", err)
	os.Exit(1)
}

// Command kctllean is the podcount controller of podcount/kctl with the
// flags and servers of podcount/controllerruntime and nothing more:
//
//	kctllean --kubeconfig FILE [--qps 500] [--workers 2] [--cpuprofile FILE] [--metrics-addr ADDR]
//
// Its metrics server is linked and off unless --metrics-addr is set, as
// controller-runtime's is (BindAddress "0"). podcount/kctl also calls
// Manager.Shard, KeepHistory and debug.ServePprof behind its flags, for the
// other benchmarks, so its binary links sharding, the history and the
// pprof handlers; benchrun's stack kctl-lean runs this program instead, to
// measure idle RSS with only what the comparison with controller-runtime
// needs linked (kctl links an extra only when the program calls it).
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/kctl-dev/kctl"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, in-cluster, ~/.kube/config")
	qps := flag.Float64("qps", 0, "client QPS (burst = QPS); 0 keeps kctl's default")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	workers := flag.Int("workers", 2, "concurrent reconciles")
	metricsAddr := flag.String("metrics-addr", "", "serve the metrics page on this address (Manager.ServeMetrics); empty: none")
	flag.Parse()
	if *cpuprofile != "" {
		stop := startProfile(*cpuprofile)
		defer stop()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	cfg, err := kctl.LoadConfig(*kubeconfig)
	if err != nil {
		fail(log, err)
	}
	if *qps > 0 {
		cfg.QPS = float32(*qps)
		cfg.Burst = int(*qps)
	}
	mgr, err := kctl.NewManager(kctl.Options{Config: cfg, Logger: log})
	if err != nil {
		fail(log, err)
	}
	if err := mgr.ServeMetrics(*metricsAddr); err != nil {
		fail(log, err)
	}
	pods := kctl.ClientFor[corev1.Pod](mgr)
	rsets := kctl.ClientFor[appsv1.ReplicaSet](mgr)
	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return kctl.Result{}, kctl.Terminal(err) // an invalid selector does not heal by retrying
		}
		list, err := pods.List(ctx, kctl.ListOptions{Namespace: rs.Namespace, Labels: sel})
		if err != nil {
			return kctl.Result{}, err
		}
		n := strconv.Itoa(len(list))
		if rs.Labels["pod-count"] == n {
			return kctl.Result{}, nil
		}
		if rs.Labels == nil {
			rs.Labels = map[string]string{}
		}
		rs.Labels["pod-count"] = n
		if err := rsets.Update(ctx, rs); err != nil && !apierrors.IsNotFound(err) {
			return kctl.Result{}, err
		}
		return kctl.Result{}, nil
	})
	c.MaxConcurrentReconciles(*workers)
	kctl.Owns[corev1.Pod](c) // a Pod's controller owner reference enqueues its ReplicaSet
	if err := mgr.Start(kctl.SignalContext()); err != nil {
		fail(log, err)
	}
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
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func fail(log *slog.Logger, err error) {
	log.Error("podcount failed", "err", err)
	os.Exit(1)
}

// Command kctl is the podcount controller written with kctl: it labels every
// ReplicaSet with pod-count=<n>, n being the number of Pods in the cache that
// match the ReplicaSet's selector, and writes only when the label changes.
//
//	kctl --kubeconfig FILE [--qps 500] [--workers 2] [--history] [--metrics-addr ADDR] [--pprof-addr ADDR]
//	     [--cpuprofile FILE [--cpuprofile-hz 1000]] [--memprofile FILE]
//	     [--shards --shard-namespace NS [--shard-group podcount] [--shard-identity ID]
//	      [--lease-duration D --renew-deadline D --renew-period D]]
//
// Everything not set by a flag is kctl's default. --shards runs it as one
// replica of a shard group (Manager.Shard): run the same command N times,
// each with its own --shard-identity, and they share the ReplicaSets by
// namespace (benchrun shard). --history turns on the
// Manager's per-key reconcile history with its defaults
// (Manager.KeepHistory), to measure what it costs (the stack kctl-history
// of benchrun). --cpuprofile-hz samples the CPU profile more often than Go's
// 100 Hz (a 1 s run gives about 100 samples at 100 Hz: too few to see a 1 %
// share; the kernel's tick, often 250 Hz, caps what is delivered, and pprof
// labels each sample 1/hz s); --memprofile records every 4 KB of allocation (runtime.MemProfileRate)
// and writes the allocation profile at exit.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/debug"
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
	cpuHz := flag.Int("cpuprofile-hz", 0, "CPU profile samples a second; 0 keeps Go's 100")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	history := flag.Bool("history", false, "keep each key's last reconciles (Manager.KeepHistory with its defaults)")
	metricsAddr := flag.String("metrics-addr", "", "serve the metrics page on this address (Manager.ServeMetrics); empty: none")
	pprofAddr := flag.String("pprof-addr", "", "serve /debug/pprof/ on this address (debug.ServePprof); heap?gc=1 collects first; empty: none")
	shards := flag.Bool("shards", false, "run as one replica of a shard group (Manager.Shard): the replicas share the work and the cache")
	var shard kctl.ShardOptions
	flag.StringVar(&shard.Group, "shard-group", "podcount", "with --shards: the group's name")
	flag.StringVar(&shard.Namespace, "shard-namespace", "", "with --shards: the namespace of the group's Leases (required outside a cluster)")
	flag.StringVar(&shard.Identity, "shard-identity", "", "with --shards: this replica's name in the group; empty: <hostname>-<random>")
	flag.DurationVar(&shard.LeaseDuration, "lease-duration", 0, "with --shards: ShardOptions.LeaseDuration; 0: kctl's default")
	flag.DurationVar(&shard.RenewDeadline, "renew-deadline", 0, "with --shards: ShardOptions.RenewDeadline; 0: kctl's default")
	flag.DurationVar(&shard.RenewPeriod, "renew-period", 0, "with --shards: ShardOptions.RenewPeriod; 0: kctl's default")
	flag.Parse()
	if *cpuprofile != "" {
		stop := startProfile(*cpuprofile, *cpuHz)
		defer stop()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 4096
		defer writeAllocs(*memprofile)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	cfg, err := kctl.LoadConfig(*kubeconfig)
	if err != nil {
		fail(log, err)
	}
	if *qps > 0 {
		cfg.QPS, cfg.Burst = float32(*qps), int(*qps)
	}
	mgr, err := kctl.NewManager(kctl.Options{Config: cfg, Logger: log})
	if err != nil {
		fail(log, err)
	}
	if *history {
		mgr.KeepHistory(kctl.HistoryOptions{})
	}
	if *shards {
		if err := mgr.Shard(shard); err != nil {
			fail(log, err)
		}
	}
	if err := mgr.ServeMetrics(*metricsAddr); err != nil {
		fail(log, err)
	}
	if err := debug.ServePprof(mgr, *pprofAddr); err != nil {
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

// startProfile starts a CPU profile into path, at hz samples a second
// unless 0, and returns what ends it.
func startProfile(path string, hz int) func() {
	if hz > 0 {
		// Set before StartCPUProfile, whose own SetCPUProfileRate(100) then
		// only prints that a rate is already set, and keeps hz.
		runtime.SetCPUProfileRate(hz)
	}
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

// writeAllocs writes the allocation profile (everything allocated since
// the start, sampled every runtime.MemProfileRate bytes) into path.
func writeAllocs(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	if err != nil {
		slog.Error("cannot write the allocation profile", "err", err)
	}
}

func fail(log *slog.Logger, err error) {
	log.Error("podcount failed", "err", err)
	os.Exit(1)
}

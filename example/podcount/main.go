// Command podcount is kctl's classic example: a controller of ReplicaSets
// that owns Pods and labels each ReplicaSet with pod-count=<n>, the number of
// Pods its label selector matches, counted in the cache.
//
//	go run ./example/podcount --kubeconfig ~/.kube/config
//	kubectl get rs -A -L pod-count
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kbflags"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	f := newFlags(flag.CommandLine)
	flag.Parse()
	log, err := f.Logger(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mgr, err := kctl.NewManager(f.Options(log)) // loads the config and connects; starts nothing yet
	if err == nil {
		// Metrics, probes and leader election are off unless turned on; "" leaves a server off.
		err = f.Serve(mgr, kctl.LeaderElection{Name: "podcount", Namespace: f.leaseNamespace})
	}
	if err == nil && f.shards {
		// The replicas share the ReplicaSets by namespace instead of standing by.
		err = mgr.Shard(f.shardOptions())
	}
	if err != nil {
		log.Error("cannot make the manager", "err", err)
		os.Exit(1)
	}
	setup(mgr)
	// Start runs caches, probes, metrics and the controller until SIGINT or
	// SIGTERM, then shuts down gracefully. Builder mistakes are returned here.
	if err := mgr.Start(kctl.SignalContext()); err != nil {
		log.Error("podcount stopped", "err", err)
		os.Exit(1)
	}
}

// flags are podcount's command-line flags: kubebuilder's, so that its
// manifests and habits carry over, and the namespace of the Lease.
type flags struct {
	*kbflags.Flags
	leaseNamespace string
	shards         bool
}

// newFlags defines podcount's flags on fs; main and the tests call it.
func newFlags(fs *flag.FlagSet) *flags {
	f := &flags{Flags: kbflags.Register(fs, "run the controller only on the replica holding the Lease podcount")}
	fs.StringVar(&f.leaseNamespace, "leader-elect-namespace", "", "namespace of the Lease; default: the Pod's namespace")
	fs.BoolVar(&f.shards, "shards", false, "share the work and the cache between the replicas (a StatefulSet), each holding a Lease podcount-<pod name>; not with --leader-elect")
	return f
}

// shardOptions are the sharding options the flags ask for: the group
// podcount, its Leases in --leader-elect-namespace, this replica named
// after its host (a StatefulSet's pod name, stable across restarts).
func (f *flags) shardOptions() kctl.ShardOptions {
	host, _ := os.Hostname()
	return kctl.ShardOptions{Group: "podcount", Namespace: f.leaseNamespace, Identity: host}
}

// setup adds the podcount controller to mgr; the tests call it too.
func setup(mgr *kctl.Manager) {
	// Clients whose reads come from mgr's shared cache and writes go to the API server.
	pods := kctl.ClientFor[corev1.Pod](mgr)
	rsets := kctl.ClientFor[appsv1.ReplicaSet](mgr)
	// A controller of ReplicaSets: T is inferred from the reconcile function,
	// which runs for every ReplicaSet that changes (one key at a time).
	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
		return countPods(ctx, pods, rsets, rs)
	})
	// A change to a Pod whose controller owner reference names a ReplicaSet
	// (as the ReplicaSet controller sets it) reconciles that ReplicaSet.
	kctl.Owns[corev1.Pod](c)
}

// countPods labels rs with the number of Pods its selector matches. It looks
// at the state, not at the event that woke it: many events give one reconcile.
func countPods(ctx context.Context, pods *kctl.Client[corev1.Pod], rsets *kctl.Client[appsv1.ReplicaSet], rs *appsv1.ReplicaSet) (kctl.Result, error) {
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil { // retrying cannot fix a bad selector: wait for the next change
		return kctl.Result{}, kctl.Terminal(fmt.Errorf("bad selector: %w", err))
	}
	list, err := pods.List(ctx, kctl.ListOptions{Namespace: rs.Namespace, Labels: sel}) // from the cache
	if err != nil {
		return kctl.Result{}, err // retried with backoff
	}
	n := strconv.Itoa(len(list))
	if rs.Labels["pod-count"] == n {
		return kctl.Result{}, nil // nothing to do, including after our own update
	}
	if rs.Labels == nil {
		rs.Labels = map[string]string{}
	}
	rs.Labels["pod-count"] = n
	kctl.LoggerFrom(ctx).Info("labelling", "pod-count", n)
	// rs is our own copy; a Conflict (someone else wrote first) is retried with a fresh copy.
	return kctl.Result{}, rsets.Update(ctx, rs)
}

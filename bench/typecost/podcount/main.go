// Command podcount is the podcount controller of kctl's README with nothing
// around it: a Manager, a cached client of Pods, a client of ReplicaSets, a
// controller of ReplicaSets that owns Pods, and Start. Its size less that
// of floor/podcount (the same types' code, rest, clientcmd and one request,
// without kctl) is what kctl itself adds to a controller that calls only
// the core. podcount/kctl, the controller benchrun runs, also calls
// Manager.Shard, KeepHistory, ServeMetrics and debug.ServePprof behind its flags
// and writes profiles with runtime/pprof, so it links those too. It is
// built, never run.
package main

import (
	"context"
	"log"
	"strconv"

	"github.com/kctl-dev/kctl"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	mgr, err := kctl.NewManager(kctl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	pods := kctl.ClientFor[corev1.Pod](mgr)
	rsets := kctl.ClientFor[appsv1.ReplicaSet](mgr)
	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return kctl.Result{}, kctl.Terminal(err)
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
		return kctl.Result{}, rsets.Update(ctx, rs)
	})
	kctl.Owns[corev1.Pod](c)
	if err := mgr.Start(kctl.SignalContext()); err != nil {
		log.Fatal(err)
	}
}

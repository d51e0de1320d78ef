package kctl_test

import (
	"context"
	"strconv"

	"github.com/kctl-dev/kctl"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A controller that owns Pods only to count them caches their metadata
// only: about a tenth of the memory of whole Pods. Its reconcile reads the
// Pods from the metadata informer; a cached ClientFor[corev1.Pod] read
// would be an error naming the fix (Owns caches them whole).
func ExampleOwnsMetadata() {
	mgr, err := kctl.NewManager(kctl.Options{})
	if err != nil {
		return
	}
	pods, err := kctl.MetadataInformerFor[corev1.Pod](mgr.Cache())
	if err != nil {
		return
	}
	rsets := kctl.ClientFor[appsv1.ReplicaSet](mgr)
	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return kctl.Result{}, kctl.Terminal(err)
		}
		mine, err := pods.List(kctl.ListOptions{Namespace: rs.Namespace, Labels: sel})
		if err != nil {
			return kctl.Result{}, err
		}
		n := strconv.Itoa(len(mine))
		if rs.Labels["pod-count"] == n {
			return kctl.Result{}, nil
		}
		if rs.Labels == nil {
			rs.Labels = map[string]string{}
		}
		rs.Labels["pod-count"] = n
		return kctl.Result{}, rsets.Update(ctx, rs)
	})
	kctl.OwnsMetadata[corev1.Pod](c) // a Pod's owner reference, from its metadata, enqueues its ReplicaSet
	_ = mgr.Start(kctl.SignalContext())
}

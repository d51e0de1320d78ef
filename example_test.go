package kctl_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/kctl-dev/kctl"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Widget is a custom resource declared as a plain Go struct: no generated code.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
}

var widgets = kctl.Declare[Widget](kctl.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true})

// The Go type says where objects live: k8s.io/api types need no declaration,
// a CRD struct needs one line.
func ExampleResourceOf() {
	rs, _ := kctl.ResourceOf[appsv1.ReplicaSet]()
	fmt.Println(rs, rs.APIVersion(), rs.Namespaced)
	ns, _ := kctl.ResourceOf[corev1.Namespace]()
	fmt.Println(ns, ns.Namespaced)
	fmt.Println(widgets, widgets.APIVersion())
	_, err := kctl.ResourceOf[struct{ metav1.ObjectMeta }]()
	fmt.Println(err != nil)
	// Output:
	// replicasets.apps/v1 apps/v1 true
	// namespaces/v1 false
	// widgets.example.com/v1 example.com/v1
	// true
}

// A Terminal error is logged and not retried until the object changes again.
func ExampleTerminal() {
	err := kctl.Terminal(fmt.Errorf("spec.size %d is negative", -1))
	fmt.Println(errors.Is(err, kctl.ErrTerminal))
	fmt.Println(err)
	// Output:
	// true
	// terminal: spec.size -1 is negative
}

// The seed example: label each ReplicaSet with the number of its Pods.
func ExampleNewController() {
	mgr, err := kctl.NewManager(kctl.Options{})
	if err != nil {
		return // no cluster configuration here
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
		if rs.Labels == nil {
			rs.Labels = map[string]string{}
		}
		rs.Labels["pod-count"] = strconv.Itoa(len(list))
		return kctl.Result{}, rsets.Update(ctx, rs)
	})
	kctl.Owns[corev1.Pod](c)
	_ = mgr.Start(kctl.SignalContext())
}

// A program's own metrics, on the page that mgr.ServeMetrics serves.
func ExampleManager_Metrics() {
	mgr, err := kctl.NewManager(kctl.Options{Config: &rest.Config{Host: "https://127.0.0.1:6443"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	jobs, err := mgr.Metrics().Counter("myapp_jobs_total", "Jobs run, by result.", "result")
	if err != nil {
		fmt.Println(err)
		return
	}
	failed := jobs.With("failed") // look a series up once, use it often
	failed.Inc()
	queued, err := mgr.Metrics().Gauge("myapp_queued_jobs", "Jobs waiting.")
	if err != nil {
		fmt.Println(err)
		return
	}
	queued.Set(3)

	// Mistakes are errors from registration.
	_, err = mgr.Metrics().Counter("myapp_jobs_total", "Registered twice.")
	fmt.Println(err)
	_, err = mgr.Metrics().Gauge("myapp-queue", "Not a Prometheus name.")
	fmt.Println(err)
	// Output:
	// kctl: metric "myapp_jobs_total": myapp_jobs_total is registered already: register each metric once and keep what registration returns
	// kctl: metric "myapp-queue": the name is not a Prometheus metric name, [a-zA-Z_][a-zA-Z0-9_]*
}

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

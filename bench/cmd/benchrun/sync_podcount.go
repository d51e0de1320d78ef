package main

// The podcount controller's first sync over the sync Pods, as a controller
// that Owns them: kctl with whole Pods (Owns) and with their metadata only
// (OwnsMetadata), and controller-runtime with builder.OnlyMetadata. Each
// reconcile counts a ReplicaSet's Pods from the cache (from their metadata
// where only that is cached) and writes nothing; a child returns once the
// Pods have synced and each of the podfixture's ReplicaSets has been
// reconciled with a count.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/podfixture"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func init() {
	syncers["kctl-podcount"] = syncKctlPodcount(false)
	syncers["kctl-podcount-metadata"] = syncKctlPodcount(true)
	syncers["controller-runtime-podcount-metadata"] = syncControllerRuntimePodcount
}

// podcountStacks are the podcount sync stacks that follow each stack in
// the sync table.
var podcountStacks = map[string][]string{
	"kctl":               {"kctl-podcount", "kctl-podcount-metadata"},
	"controller-runtime": {"controller-runtime-podcount-metadata"},
}

// createOwners creates, in ns, the ReplicaSets the podfixture's Pods name
// as their controller (no replicas: nothing makes Pods for them), each
// selecting its workload's Pods.
func createOwners(ctx context.Context, cs kubernetes.Interface, ns string) error {
	for i := range podfixture.Workloads {
		pod := podfixture.Pod(ns, i)
		sel := map[string]string{
			"app.kubernetes.io/name": pod.Labels["app.kubernetes.io/name"],
			"pod-template-hash":      pod.Labels["pod-template-hash"],
		}
		zero := int32(0)
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.OwnerReferences[0].Name},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: &zero,
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:1"}}},
				},
			},
		}
		_, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// counted records each ReplicaSet's last count; done closes once every
// podfixture ReplicaSet has a count above zero.
type counted struct {
	mu     sync.Mutex
	counts map[string]int
	done   chan struct{}
}

func newCounted() *counted {
	return &counted{counts: map[string]int{}, done: make(chan struct{})}
}

func (c *counted) set(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := len(c.counts)
	if n > 0 {
		c.counts[name] = n
	}
	if was < podfixture.Workloads && len(c.counts) == podfixture.Workloads {
		close(c.done)
	}
}

func (c *counted) wait(ctx context.Context, stack string) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: not every ReplicaSet was reconciled with a count: %w", stack, ctx.Err())
	}
}

func syncKctlPodcount(metadata bool) syncer {
	return func(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		mgr, err := kctl.NewManager(kctl.Options{Config: cfg, Logger: quiet})
		if err != nil {
			return nil, err
		}
		done := newCounted()
		var count func(ctx context.Context, ns string, sel labels.Selector) (int, error)
		var objects func() int
		var synced func(context.Context) error
		if metadata {
			metas, err := kctl.MetadataInformerFor[corev1.Pod](mgr.Cache())
			if err != nil {
				return nil, err
			}
			metas.AddHandler(func(ev kctl.Event[metav1.PartialObjectMetadata]) {
				if ev.Type == kctl.Added {
					added()
				}
			})
			count = func(_ context.Context, ns string, sel labels.Selector) (int, error) {
				list, err := metas.List(kctl.ListOptions{Namespace: ns, Labels: sel})
				return len(list), err
			}
			objects = func() int { n, _ := metas.Stats(); return n }
			synced = metas.WaitForSync
		} else {
			pods, err := kctl.InformerFor[corev1.Pod](mgr.Cache())
			if err != nil {
				return nil, err
			}
			pods.AddHandler(func(ev kctl.Event[corev1.Pod]) {
				if ev.Type == kctl.Added {
					added()
				}
			})
			cached := kctl.ClientFor[corev1.Pod](mgr)
			count = func(ctx context.Context, ns string, sel labels.Selector) (int, error) {
				list, err := cached.List(ctx, kctl.ListOptions{Namespace: ns, Labels: sel})
				return len(list), err
			}
			objects = func() int { n, _ := pods.Stats(); return n }
			synced = pods.WaitForSync
		}
		c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
			sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
			if err != nil {
				return kctl.Result{}, kctl.Terminal(err)
			}
			n, err := count(ctx, rs.Namespace, sel)
			if err != nil {
				return kctl.Result{}, err
			}
			done.set(rs.Namespace+"/"+rs.Name, n)
			return kctl.Result{}, nil
		})
		c.MaxConcurrentReconciles(2)
		if metadata {
			kctl.OwnsMetadata[corev1.Pod](c)
		} else {
			kctl.Owns[corev1.Pod](c)
		}
		go mgr.Start(ctx)
		if err := synced(ctx); err != nil {
			return nil, fmt.Errorf("kctl podcount cache did not sync: %w", err)
		}
		return objects, done.wait(ctx, "kctl podcount")
	}
}

// syncControllerRuntimePodcount is podcount in controller-runtime with
// Owns(&corev1.Pod{}, builder.OnlyMetadata), counting Pods from a cached
// PartialObjectMetadataList.
func syncControllerRuntimePodcount(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
	ctrl.SetLogger(logr.Discard())
	cfg.QPS = -1 // what controller-runtime's GetConfig does
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	done := newCounted()
	cl := mgr.GetClient()
	count := func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		var rs appsv1.ReplicaSet
		if err := cl.Get(ctx, req.NamespacedName, &rs); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return ctrl.Result{}, nil
		}
		var pods metav1.PartialObjectMetadataList
		pods.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "PodList"})
		if err := cl.List(ctx, &pods, client.InNamespace(rs.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return ctrl.Result{}, err
		}
		done.set(req.String(), len(pods.Items))
		return ctrl.Result{}, nil
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("podcount").
		For(&appsv1.ReplicaSet{}).
		Owns(&corev1.Pod{}, builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(reconcile.Func(count))
	if err != nil {
		return nil, err
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	inf, err := mgr.GetCache().GetInformer(ctx, meta)
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { added() }}); err != nil {
		return nil, err
	}
	go mgr.Start(ctx)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.New("controller-runtime podcount cache did not sync")
	}
	objects := func() int {
		if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
			return len(s.GetStore().ListKeys())
		}
		return -1
	}
	return objects, done.wait(ctx, "controller-runtime podcount")
}

// Command clientgo is the podcount controller written with plain client-go in
// the style of k8s.io/sample-controller: a clientset, a SharedInformerFactory,
// listers and a rate-limited workqueue. It labels every ReplicaSet with
// pod-count=<n>, n being the number of Pods in the cache that match the
// ReplicaSet's selector, and writes only when the label changes.
//
//	clientgo --kubeconfig FILE [--qps 500] [--workers 2]
//
// Everything not set by a flag is client-go's default (its typed clients
// prefer protobuf since v0.35), except that the informers do not resync, as
// controller-runtime's (every 10 h) do not within a benchmark.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, then in-cluster")
	qps := flag.Float64("qps", 0, "client QPS (burst = QPS); 0 keeps client-go's default (5 QPS, burst 10)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	workers := flag.Int("workers", 2, "concurrent syncs")
	flag.Parse()
	if *cpuprofile != "" {
		stop := startProfile(*cpuprofile)
		defer stop()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	klog.SetSlogLogger(log)

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fail(log, err)
	}
	if *qps > 0 {
		cfg.QPS, cfg.Burst = float32(*qps), int(*qps)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(log, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	factory := informers.NewSharedInformerFactory(cs, 0)
	c := newController(cs, factory.Apps().V1().ReplicaSets().Informer(), factory.Core().V1().Pods().Informer(),
		factory.Apps().V1().ReplicaSets().Lister(), factory.Core().V1().Pods().Lister(), log)
	factory.Start(ctx.Done())
	if err := c.run(ctx, *workers); err != nil {
		fail(log, err)
	}
	factory.Shutdown()
}

type controller struct {
	cs       kubernetes.Interface
	rsLister appslisters.ReplicaSetLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	log      *slog.Logger
}

func newController(cs kubernetes.Interface, rsInf, podInf cache.SharedIndexInformer,
	rsLister appslisters.ReplicaSetLister, pods corelisters.PodLister, log *slog.Logger) *controller {
	c := &controller{
		cs: cs, rsLister: rsLister, pods: pods, log: log,
		synced: []cache.InformerSynced{rsInf.HasSynced, podInf.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "podcount"}),
	}
	rsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.handlePod,
		UpdateFunc: func(old, cur any) {
			c.handlePod(cur)
			c.handlePod(old) // the old owner, should the owner reference have changed
		},
		DeleteFunc: c.handlePod,
	})
	return c
}

func (c *controller) enqueue(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if m, err := meta(obj); err == nil {
		c.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// handlePod enqueues the ReplicaSet that controls a Pod.
func (c *controller) handlePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta(obj)
	if err != nil {
		return
	}
	if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "ReplicaSet" && ref.APIVersion == "apps/v1" {
		c.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: ref.Name})
	}
}

func meta(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}

func (c *controller) run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	c.log.Info("waiting for informer caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("failed to wait for caches to sync")
	}
	c.log.Info("starting workers", "count", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.syncHandler(ctx, key); err != nil {
		c.log.Error("sync failed; requeuing", "key", key.String(), "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	rs, err := c.rsLister.ReplicaSets(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil // an invalid selector does not heal by retrying
	}
	pods, err := c.pods.Pods(rs.Namespace).List(sel)
	if err != nil {
		return err
	}
	n := strconv.Itoa(len(pods))
	if rs.Labels["pod-count"] == n {
		return nil
	}
	rs = rs.DeepCopy() // never modify the lister's copy
	if rs.Labels == nil {
		rs.Labels = map[string]string{}
	}
	rs.Labels["pod-count"] = n
	_, err = c.cs.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
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

package kctl

// The shard tests' clusters: namespaces named as clusters name them,
// ReplicaSets in each (shardFixture), or ReplicaSets each with a Pod it
// owns (shardPodFixture), created concurrently on a Conn without a rate
// limit, so that thousands of objects take seconds.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/podfixture"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// fixtureWorkers is how many requests the fixtures keep in flight
// while no member runs; bumpWorkers while members run: fewer, so that
// the server still answers their Lease renewals in time on a loaded
// 2-core machine (at 24, members of the 3,000-object group lost their
// Leases: renewals took over a 2.25 s RenewDeadline).
const (
	fixtureWorkers = 24
	bumpWorkers    = 16
)

// fixtureConn is a Conn for a test's own objects: no client-side rate
// limit, so that its concurrent requests are not paced.
func fixtureConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.QPS = -1
	conn, err := NewConn(c)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// inParallel calls do(i) for each i in [0, n) on workers goroutines,
// and returns the first error; after one, the calls not begun are
// skipped.
func inParallel(n, workers int, do func(i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				err := do(i)
				if err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return first
}

// createNamespaces creates the namespaces nss, keeping those that exist
// (namespaces are never deleted on a test control plane).
func createNamespaces(t *testing.T, conn *Conn, nss []string) {
	t.Helper()
	namespaces := NewClient[corev1.Namespace](conn)
	err := inParallel(len(nss), fixtureWorkers, func(i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i]}}
		err := namespaces.Create(t.Context(), ns)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// shardFixture creates the namespaces (kept if they exist: namespaces
// are never deleted on a test control plane) and perNS ReplicaSets named
// rs-<run>-<j> in each, and returns their keys.
func shardFixture(t *testing.T, cfg *rest.Config, nss []string, perNS int) []Key {
	t.Helper()
	conn := fixtureConn(t, cfg)
	createNamespaces(t, conn, nss)
	rsets := NewClient[appsv1.ReplicaSet](conn)
	run := strings.ToLower(randomSuffix())
	keys := make([]Key, len(nss)*perNS)
	err := inParallel(len(keys), fixtureWorkers, func(i int) error {
		ns := nss[i/perNS]
		rs := testReplicaSet(ns, fmt.Sprintf("rs-%s-%d", run, i%perNS))
		keys[i] = Key{ns, rs.Name}
		return rsets.Create(t.Context(), rs)
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// randomSuffix is 6 random letters and digits.
func randomSuffix() string { return newID()[:6] }

// bump changes an annotation of every key's ReplicaSet, so that each is
// reconciled again.
func bump(t *testing.T, cfg *rest.Config, keys []Key, value string) {
	t.Helper()
	rsets := NewClient[appsv1.ReplicaSet](fixtureConn(t, cfg))
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bump":%q}}}`, value))
	err := inParallel(len(keys), bumpWorkers, func(i int) error {
		k := keys[i]
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		return rsets.Patch(t.Context(), rs, MergePatch, patch, PatchOptions{})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// podFixture is what shardPodFixture made: ReplicaSets (keys), each
// the controller of one Pod in its namespace, all labelled by
// selector.
type podFixture struct {
	keys     []Key
	selector labels.Selector
}

// shardPodFixture creates the namespaces nss and, in each, perNS (at
// most podfixture.Workloads) ReplicaSets, each with one Pod it controls:
// the namespace's j-th Pod of internal/podfixture (workload j: its
// labels, annotations, containers, token volume, node), renamed after
// its ReplicaSet, <workload>-<run>, whose pod-template-hash is the
// run's random suffix. No controller-manager runs: the test makes the
// Pods; their status is left as Create leaves it. Everything made is
// deleted when the test ends (the Pods at once: no kubelet would
// confirm), so the server's later tests do not list it.
func shardPodFixture(t *testing.T, cfg *rest.Config, nss []string, perNS int) podFixture {
	t.Helper()
	if perNS > podfixture.Workloads {
		t.Fatalf("shardPodFixture: %d ReplicaSets per namespace; at most %d", perNS, podfixture.Workloads)
	}
	began := time.Now()
	conn := fixtureConn(t, cfg)
	createNamespaces(t, conn, nss)
	run := strings.ToLower(randomSuffix())
	fx := podFixture{
		keys:     make([]Key, len(nss)*perNS),
		selector: labels.SelectorFromSet(labels.Set{"pod-template-hash": run}),
	}
	t.Cleanup(func() { deletePodFixture(t, conn, nss, fx.selector) })
	rsets := NewClient[appsv1.ReplicaSet](conn)
	pods := NewClient[corev1.Pod](conn)
	err := inParallel(len(fx.keys), fixtureWorkers, func(i int) error {
		rs, pod := fixturePair(nss[i/perNS], i%perNS, run)
		fx.keys[i] = Key{rs.Namespace, rs.Name}
		if err := rsets.Create(t.Context(), rs); err != nil {
			return err
		}
		if err := SetControllerReference(rs, pod); err != nil {
			return err
		}
		return pods.Create(t.Context(), pod)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture: %d namespaces, %d ReplicaSets and %d Pods created in %v (%d at a time)",
		len(nss), len(fx.keys), len(fx.keys), time.Since(began).Round(time.Millisecond), fixtureWorkers)
	return fx
}

// fixturePair is the ReplicaSet <workload>-<run> of workload j in ns,
// and its Pod, podfixture's j-th, ready to create.
func fixturePair(ns string, j int, run string) (*appsv1.ReplicaSet, *corev1.Pod) {
	pod := podfixture.Pod(ns, j)
	app := pod.Labels["app.kubernetes.io/name"]
	name := app + "-" + run
	sel := map[string]string{"app.kubernetes.io/name": app, "pod-template-hash": run}
	pod.Labels["pod-template-hash"] = run
	zero := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: sel},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels},
				Spec:       pod.Spec,
			},
		},
	}
	generated := pod.Name[strings.LastIndex(pod.Name, "-")+1:]
	pod.Name = name + "-" + generated
	pod.GenerateName = name + "-"
	pod.UID = "" // the server's to set
	pod.ResourceVersion = ""
	pod.CreationTimestamp = metav1.Time{}
	pod.OwnerReferences = nil // SetControllerReference, once rs has its uid
	pod.Status = corev1.PodStatus{}
	return rs, pod
}

// deletePodFixture deletes the ReplicaSets and Pods of selector in nss.
func deletePodFixture(t *testing.T, conn *Conn, nss []string, selector labels.Selector) {
	began := time.Now()
	rsets := NewClient[appsv1.ReplicaSet](conn)
	pods := NewClient[corev1.Pod](conn)
	now := int64(0)
	// t.Context has ended: the test's cleanups run after it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := inParallel(len(nss), fixtureWorkers, func(i int) error {
		opts := ListOptions{Namespace: nss[i], Labels: selector}
		err := pods.DeleteAllOf(ctx, opts, DeleteOptions{GracePeriodSeconds: &now})
		if err != nil {
			return err
		}
		return rsets.DeleteAllOf(ctx, opts, DeleteOptions{})
	})
	if err != nil {
		t.Errorf("deleting the fixture: %v", err)
	}
	t.Logf("fixture deleted in %v", time.Since(began).Round(time.Millisecond))
}

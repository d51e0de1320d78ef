package kctl

// The shard tests' clusters: namespaces named as clusters name them,
// ReplicaSets in each (shardFixture), or ReplicaSets each with a Pod it
// owns (shardPodFixture), created concurrently on a Conn without a rate
// limit, so that thousands of objects take seconds.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/ctrlnames"
	"github.com/kctl-dev/kctl/internal/podfixture"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
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
func randomSuffix() string { return ctrlnames.ReconcileID()[:6] }

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

// The record of a shard group test: every reconcile of every member,
// when and of which key (shardLog), and what is checked on it: no key
// reconciled by two members at once (overlaps), who reconciled what
// (since), and what each reconcile found in its member's cache
// (miscounted).

// shardSpan is one reconcile: by which member, of which key, when, and
// how many Pods of its ReplicaSet it found in the member's cache (-1:
// it did not look).
type shardSpan struct {
	member     string
	key        Key
	start, end time.Time
	pods       int
}

// shardLog records every reconcile of every member.
type shardLog struct {
	mu    sync.Mutex
	spans []shardSpan
}

// reconcile is member's reconcile function: it records its span, and
// works for 2 ms (or until its context ends) so that overlaps would show.
func (l *shardLog) reconcile(member string) func(context.Context, *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		l.work(ctx, member, Key{rs.Namespace, rs.Name}, -1)
		return Result{}, nil
	}
}

// countPods is member's reconcile function of podcount: it counts the
// ReplicaSet's Pods in the member's cache of Pod metadata, then records
// its span as reconcile does.
func (l *shardLog) countPods(member string, pods func(ListOptions) int) func(context.Context, *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil {
			return Result{}, Terminal(err)
		}
		n := pods(ListOptions{Namespace: rs.Namespace, Labels: sel})
		l.work(ctx, member, Key{rs.Namespace, rs.Name}, n)
		return Result{}, nil
	}
}

// work records a reconcile of key by member that found pods Pods, which
// works for 2 ms from now or until ctx ends.
func (l *shardLog) work(ctx context.Context, member string, key Key, pods int) {
	sp := shardSpan{member: member, key: key, start: time.Now(), pods: pods}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Millisecond): // the reconcile's work
	}
	sp.end = time.Now()
	l.mu.Lock()
	l.spans = append(l.spans, sp)
	l.mu.Unlock()
}

// miscounted lists the reconciles of the keys in ours that found other
// than want Pods.
func (l *shardLog) miscounted(ours map[Key]bool, want int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for _, sp := range l.spans {
		if ours[sp.key] && sp.pods != want {
			bad = append(bad, fmt.Sprintf("%s by %s at %s: %d Pods", sp.key, sp.member, sp.start.Format(time.StampMicro), sp.pods))
		}
	}
	return bad
}

// len is how many reconciles l recorded.
func (l *shardLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans)
}

// since returns, by key, the members that reconciled it starting at or
// after t.
func (l *shardLog) since(t time.Time) map[Key][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Key][]string{}
	for _, sp := range l.spans {
		if !sp.start.Before(t) {
			out[sp.key] = append(out[sp.key], sp.member)
		}
	}
	return out
}

// overlaps lists every pair of reconciles of one key by two members at
// overlapping times.
func (l *shardLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[Key][]shardSpan{}
	for _, sp := range l.spans {
		byKey[sp.key] = append(byKey[sp.key], sp)
	}
	var bad []string
	for k, sps := range byKey {
		for i, a := range sps {
			for _, b := range sps[i+1:] {
				if a.member != b.member && a.start.Before(b.end) && b.start.Before(a.end) {
					bad = append(bad, fmt.Sprintf("%s: %s [%v, %v] and %s [%v, %v]", k,
						a.member, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro),
						b.member, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro)))
				}
			}
		}
	}
	return bad
}

// The shard tests' scale and their time bounds. The scale and endurance
// tests (the group of 3 over thousands of objects, the churn of
// membership changes) run small under go test and make test, in full
// under make test-scale (KCTL_TEST_SCALE=full). Their waits are bounded
// by what the members are configured with (LeaseDuration, RenewPeriod)
// and by what the server is measured to take during the test, not by a
// fixed number of seconds that a loaded machine breaks.

// testScaleEnv selects the scale of the shard scale tests: "full" runs
// them as make test-scale does; unset or "small", their small variants.
const testScaleEnv = "KCTL_TEST_SCALE"

// shardScale is the size of a scale test.
type shardScale struct {
	full bool
	// groupNamespaces and groupPerNS: the group tests' fixture
	// (runShardGroup), groupPerNS ReplicaSets with a Pod each per namespace.
	groupNamespaces, groupPerNS int
	// steps: the churn tests' membership changes.
	steps []churnStep
}

// testShardScale is the scale KCTL_TEST_SCALE asks for: full, 3,000
// ReplicaSets in 300 namespaces and the 20 churn steps; small, 300 in 60
// and the first 6 steps (1 member to 3, a kill, a graceful stop, back
// to 3).
func testShardScale(t *testing.T) shardScale {
	t.Helper()
	switch v := os.Getenv(testScaleEnv); v {
	case "full":
		return shardScale{full: true, groupNamespaces: 300, groupPerNS: 10, steps: churnSteps}
	case "", "small":
		return shardScale{groupNamespaces: 60, groupPerNS: 5, steps: churnSteps[:6]}
	default:
		t.Fatalf("%s=%q: want full, small or unset", testScaleEnv, v)
		return shardScale{}
	}
}

// settleBound is how long a group of members configured with lease and
// renew may go without any member's state changing (a range claimed,
// started, served, drained, or a namespace weighed) before a wait for
// it to settle gives up, when listing the objects the members cache
// takes relist: a peer sees a change at its next look (one renew); a
// killed member's Lease expires lease after its last renewal and is
// judged so at a look (one renew) after that, when the survivor claims
// (a hurried look: one renew at most); a range it starts is served
// once every informer has listed again with the new selector, which
// may change once more while they list (twice relist, for each of the
// two informers a pod member runs). A step that takes longer is stuck,
// whatever the machine's load: the load shows in relist.
func settleBound(lease, renew, relist time.Duration) time.Duration {
	return lease + 3*renew + 4*relist
}

// settleCap bounds a whole wait to settle, progress or not: ten
// settleBounds, so that members changing their minds forever fail.
func settleCap(bound time.Duration) time.Duration { return 10 * bound }

// measureRelist is the longest of 2 Lists of every ReplicaSet and Pod
// on cfg's server, which is what a member lists again when its ranges
// change (at most: a member lists its share).
func measureRelist(t *testing.T, cfg *rest.Config) time.Duration {
	t.Helper()
	conn := fixtureConn(t, cfg)
	rsets := NewClient[appsv1.ReplicaSet](conn)
	pods := NewClient[corev1.Pod](conn)
	var longest time.Duration
	for range 2 {
		began := time.Now()
		if _, err := rsets.List(t.Context(), ListOptions{}); err != nil {
			t.Fatalf("measuring a relist: %v", err)
		}
		if _, err := pods.List(t.Context(), ListOptions{}); err != nil {
			t.Fatalf("measuring a relist: %v", err)
		}
		longest = max(longest, time.Since(began))
	}
	return longest
}

// slowestLeaseRoundTrip measures Lease GETs in ns, one every 20 ms, from
// now until the returned stop, which returns the slowest: how long the
// server, and the machine under it, took at worst while a takeover ran.
// One round trip measured at its start (5 ms on a loaded machine) missed
// the seconds of the takeover that followed.
func slowestLeaseRoundTrip(t *testing.T, cfg *rest.Config, ns string) (stop func() time.Duration) {
	t.Helper()
	leases := NewClient[coordinationv1.Lease](fixtureConn(t, cfg))
	ctx, cancel := context.WithCancel(t.Context())
	slowest := make(chan time.Duration, 1)
	go func() {
		var longest time.Duration
		for ctx.Err() == nil {
			began := time.Now()
			_, err := leases.Get(ctx, ns, "kctl-latency-probe")
			if err == nil || apierrors.IsNotFound(err) {
				longest = max(longest, time.Since(began))
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // the poll's interval
			}
		}
		slowest <- longest
	}()
	return func() time.Duration {
		cancel()
		return <-slowest
	}
}

package kctltest_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The scenario the fake shares with the real server gives the same lines
// against the in-memory server, through kctl's own client and wire.
func TestInMemory_Scenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.StartInMemory(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	got := scenario(t, kctl.NewClient[gadget](env.Conn), env.Namespace(t))
	if !slices.Equal(got, wantScenario) {
		t.Errorf("in-memory scenario:\n%s", diffLines(got, wantScenario))
	}
}

func TestInMemory_VerbsScenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.StartInMemory(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	got := verbsScenario(t, kctl.NewClient[gadget](env.Conn), env.Namespace(t))
	if !slices.Equal(got, wantVerbsScenario) {
		t.Errorf("in-memory scenario:\n%s", diffLines(got, wantVerbsScenario))
	}
}

func TestInMemory_PodScenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.StartInMemory(t)
	got := podScenario(t, kctl.NewClient[corev1.Pod](env.Conn), env.Namespace(t))
	if !slices.Equal(got, wantPodScenario) {
		t.Errorf("in-memory Pod scenario:\n%s", diffLines(got, wantPodScenario))
	}
}

// podcountSetup is example/podcount's controller: each ReplicaSet is
// labelled with the number of Pods its selector matches.
func podcountSetup(mgr *kctl.Manager) {
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
}

func testReplicaSet(ns, name string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func testPod(t testing.TB, rs *appsv1.ReplicaSet, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels},
		Spec:       rs.Spec.Template.Spec,
	}
	if err := kctl.SetControllerReference(rs, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// podcountRun runs the podcount controller over rsets ReplicaSets with
// two Pods each, waits until they are labelled, makes changes (a Pod more
// for some, a Pod less for others), and waits until the labels follow.
func podcountRun(t *testing.T, env *kctltest.Env, rsets, changes int) {
	ns := env.Namespace(t)
	env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, podcountSetup)
	ctx := t.Context()
	rsc := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	var all []*appsv1.ReplicaSet
	want := map[string]int{}
	for i := range rsets {
		rs := testReplicaSet(ns, fmt.Sprintf("rs-%d", i))
		if err := rsc.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
		all = append(all, rs)
		for j := range 2 {
			if err := pods.Create(ctx, testPod(t, rs, fmt.Sprintf("%s-%d", rs.Name, j))); err != nil {
				t.Fatal(err)
			}
		}
		want[rs.Name] = 2
	}
	converged := func(step string) {
		t.Helper()
		kctltest.Eventually(t, step, func() string {
			list, err := rsc.List(ctx, kctl.ListOptions{Namespace: ns})
			if err != nil {
				return err.Error()
			}
			wrong := 0
			for _, rs := range list {
				if rs.Labels["pod-count"] != strconv.Itoa(want[rs.Name]) {
					wrong++
				}
			}
			if wrong > 0 {
				return fmt.Sprintf("%d of %d ReplicaSets not labelled as wanted", wrong, len(list))
			}
			return ""
		})
	}
	converged("every ReplicaSet labelled pod-count=2")
	for i := range changes {
		rs := all[i%len(all)]
		if i%2 == 0 {
			if err := pods.Create(ctx, testPod(t, rs, fmt.Sprintf("%s-extra-%d", rs.Name, i))); err != nil {
				t.Fatal(err)
			}
			want[rs.Name]++
		} else {
			if err := pods.Delete(ctx, ns, rs.Name+"-0"); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			want[rs.Name]--
		}
	}
	converged(fmt.Sprintf("the labels follow %d changes", changes))
}

func TestInMemory_Podcount_ConvergesAndFollowsChanges(t *testing.T) {
	start := time.Now()
	env := kctltest.StartInMemory(t)
	t.Logf("StartInMemory took %v", time.Since(start))
	podcountRun(t, env, 100, 50)
	t.Logf("100 ReplicaSets with 200 Pods converged and followed 50 changes in %v", time.Since(start))
}

// A sample-controller-style test (a CRD applied, a namespace, a Manager
// running its controller) is ready in milliseconds in memory, where the
// real control plane takes seconds to start.
func TestInMemory_SampleControllerTest_StartsInMilliseconds(t *testing.T) {
	start := time.Now()
	env := kctltest.StartInMemory(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	ns := env.Namespace(t)
	reconciled := make(chan struct{}, 1)
	env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, func(mgr *kctl.Manager) {
		gadgets := kctl.ClientFor[gadget](mgr)
		kctl.NewController(mgr, "gadgets", func(ctx context.Context, g *gadget) (kctl.Result, error) {
			g.Status.Seen = g.Generation
			err := gadgets.UpdateStatus(ctx, g)
			select {
			case reconciled <- struct{}{}:
			default:
			}
			return kctl.Result{}, err
		})
	})
	ready := time.Since(start)
	if err := kctl.NewClient[gadget](env.Conn).Create(t.Context(), &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconciled:
	case <-time.After(10 * time.Second):
		t.Fatal("no reconcile 10 s after the create")
	}
	t.Logf("server, CRD, namespace and Manager ready in %v; first reconcile done %v after the start", ready, time.Since(start))
	if ready > time.Second {
		t.Errorf("ready after %v, want milliseconds", ready)
	}
}

// Outside a synctest bubble, an in-memory Env's RunningManager serves its
// metrics page as with Start, so Reconciles counts.
func TestInMemory_StartManager_ReconcilesCounts(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	run := env.StartManager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, func(mgr *kctl.Manager) error {
		kctl.NewController(mgr, "cms", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
			return kctl.Result{}, nil
		})
		return nil
	})
	if err := kctl.NewClient[corev1.ConfigMap](env.Conn).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	kctltest.Eventually(t, "one successful reconcile counted", func() string {
		if got := run.Reconciles(t, "cms"); got["success"] != 1 {
			return fmt.Sprint(got)
		}
		return ""
	})
}

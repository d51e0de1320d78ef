package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kbflags"
	"github.com/kctl-dev/kctl/kctltest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// inNamespace is Options whose cache holds namespace ns only.
func inNamespace(ns string) kctl.Options {
	return kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
}

// The same test runs against the real control plane and in memory: only
// the line that makes the Env differs.
func TestPodcount_LabelsFollowTheReplicaSetsPods(t *testing.T) {
	labelsFollowPods(t, kctltest.Start(t))
}

func TestPodcount_LabelsFollowTheReplicaSetsPods_InMemory(t *testing.T) {
	labelsFollowPods(t, kctltest.StartInMemory(t))
}

func labelsFollowPods(t *testing.T, env *kctltest.Env) {
	ns := env.Namespace(t)
	env.Manager(t, inNamespace(ns), setup)

	ctx := t.Context()
	rsets := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	web, db := replicaSet(ns, "web"), replicaSet(ns, "db")
	for _, rs := range []*appsv1.ReplicaSet{web, db} {
		if err := rsets.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	wantCounts := func(step string, want map[string]string) {
		t.Helper()
		kctltest.Eventually(t, fmt.Sprintf("%s: pod-count labels %v", step, want), func() string {
			got := map[string]string{}
			for name := range want {
				rs, err := rsets.Get(ctx, ns, name)
				if err != nil {
					return err.Error()
				}
				got[name] = rs.Labels["pod-count"]
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprint(got)
			}
			return ""
		})
	}
	wantCounts("no pods", map[string]string{"web": "0", "db": "0"})

	for i := range 3 {
		if err := pods.Create(ctx, ownedPod(t, web, fmt.Sprintf("web-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := pods.Create(ctx, ownedPod(t, db, "db-0")); err != nil {
		t.Fatal(err)
	}
	wantCounts("pods created", map[string]string{"web": "3", "db": "1"})

	if err := pods.Delete(ctx, ns, "web-1"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db-1", "db-2"} {
		if err := pods.Create(ctx, ownedPod(t, db, name)); err != nil {
			t.Fatal(err)
		}
	}
	wantCounts("one web pod deleted, two db pods added", map[string]string{"web": "2", "db": "3"})
}

// TestPodcount_DeploymentArgs_AreItsFlags parses deployment.yaml's args with
// podcount's own flags: a renamed flag fails here, not in the cluster, and
// the logger they ask for can be made.
func TestPodcount_DeploymentArgs_AreItsFlags(t *testing.T) {
	fs := flag.NewFlagSet("podcount", flag.ContinueOnError)
	f := newFlags(fs)
	if err := kbflags.ParseDeploymentArgs(fs, "deployment.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Logger(io.Discard); err != nil {
		t.Error(err)
	}
	if !f.MetricsSecure || f.MetricsAddr != ":8443" || f.HealthAddr != ":8081" || !f.LeaderElect || f.LogFormat != "json" {
		t.Errorf("deployment.yaml's flags = %+v, want secure metrics on :8443, probes on :8081, leader election, JSON logs", *f.Flags)
	}
}

// TestPodcount_StatefulSetArgs_ShardWithoutLeaderElection parses
// statefulset.yaml's args with podcount's flags: sharded, no leader
// election (Shard excludes it), and the sharding options they make.
func TestPodcount_StatefulSetArgs_ShardWithoutLeaderElection(t *testing.T) {
	fs := flag.NewFlagSet("podcount", flag.ContinueOnError)
	f := newFlags(fs)
	if err := kbflags.ParseDeploymentArgs(fs, "statefulset.yaml"); err != nil {
		t.Fatal(err)
	}
	if !f.shards || f.LeaderElect || f.HealthAddr != ":8081" {
		t.Errorf("statefulset.yaml's flags = %+v, shards %t; want --shards, no --leader-elect, probes on :8081", *f.Flags, f.shards)
	}
	host, _ := os.Hostname()
	if o := f.shardOptions(); o.Group != "podcount" || o.Identity != host {
		t.Errorf("shardOptions() = %+v, want group podcount, identity the host name %q", o, host)
	}
}

// kubectl apply --dry-run=server: the API server validates every field
// (strictly) and runs admission without storing anything.
func TestPodcount_Manifests_PassServerDryRun(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: kctl-podcount}")) // the manifests' namespace
	env.Kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-f", "rbac.yaml", "-f", "deployment.yaml", "-f", "statefulset.yaml")
}

// TestPodcount_RBAC_IsEnoughToRunWithLeaderElection runs the controller as
// the ServiceAccount of rbac.yaml, leader election on, as deployment.yaml does.
func TestPodcount_RBAC_IsEnoughToRunWithLeaderElection(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	env.Apply(t, "rbac.yaml")
	lease := "podcount-test-" + strings.ToLower(rand.Text()[:8]) // a lease of its own: tests may run at once
	opts := inNamespace(ns)
	opts.Config = env.ServiceAccount(t, "kctl-podcount", "podcount")
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		if err := mgr.ElectLeader(kctl.LeaderElection{Name: lease, Namespace: "kctl-podcount"}); err != nil {
			t.Fatal(err)
		}
		setup(mgr)
	})

	ctx := t.Context()
	rsets := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	web := replicaSet(ns, "web")
	if err := rsets.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := kctl.NewClient[corev1.Pod](env.Conn).Create(ctx, ownedPod(t, web, "web-0")); err != nil {
		t.Fatal(err)
	}
	kctltest.Eventually(t, "pod-count=1 written as ServiceAccount podcount", func() string {
		rs, err := rsets.Get(ctx, ns, "web")
		if err != nil {
			return err.Error()
		}
		if got := rs.Labels["pod-count"]; got != "1" {
			return "pod-count=" + got
		}
		return ""
	})
}

// TestPodcount_RBAC_IsEnoughToRunSharded runs the controller sharded as
// the ServiceAccount of rbac.yaml, as statefulset.yaml does: it joins its
// group (its Lease, the namespaces, the probe of the shard selector) and
// labels a ReplicaSet.
func TestPodcount_RBAC_IsEnoughToRunSharded(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	env.Apply(t, "rbac.yaml")
	group := "podcount-test-" + strings.ToLower(rand.Text()[:8]) // a group of its own: tests may run at once
	opts := inNamespace(ns)
	opts.Config = env.ServiceAccount(t, "kctl-podcount", "podcount")
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		err := mgr.Shard(kctl.ShardOptions{Group: group, Namespace: "kctl-podcount", Identity: "podcount-0",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RenewPeriod: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		setup(mgr)
	})

	ctx := t.Context()
	rsets := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	web := replicaSet(ns, "web")
	if err := rsets.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	kctltest.Eventually(t, "pod-count=0 written by the sharded replica", func() string {
		rs, err := rsets.Get(ctx, ns, "web")
		if err != nil {
			return err.Error()
		}
		if got := rs.Labels["pod-count"]; got != "0" {
			return "pod-count=" + got
		}
		return ""
	})
}

func replicaSet(ns, name string) *appsv1.ReplicaSet {
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

// ownedPod is a Pod of rs as the ReplicaSet controller would make it (there
// is none in the test control plane).
func ownedPod(t *testing.T, rs *appsv1.ReplicaSet, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels},
		Spec:       rs.Spec.Template.Spec,
	}
	if err := kctl.SetControllerReference(rs, p); err != nil {
		t.Fatal(err)
	}
	return p
}

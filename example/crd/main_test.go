package main

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	"github.com/kctl-dev/kctl/kbflags"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// start applies crd.yaml (every test may), makes a namespace and runs the
// controller in it with opts (as the admin unless opts.Config says otherwise).
func start(t *testing.T, opts kctl.Options) (env *kctltest.Env, ns string) {
	env = kctltest.Start(t)
	env.Apply(t, "crd.yaml")
	ns = env.Namespace(t)
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	env.Manager(t, opts, setup)
	return env, ns
}

func TestCRD_WidgetGetsItsConfigMapStatusAndCleanup(t *testing.T) {
	env, ns := start(t, kctl.Options{})
	widgets, cms := clients(env)
	ctx := t.Context()

	w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
	w.Spec.Data = map[string]string{"greeting": "hello"}
	if err := widgets.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	wantReady(t, widgets, ns, "hello", 1)
	wantConfigMap(t, cms, w, map[string]string{"greeting": "hello"})
	if got, _ := widgets.Get(ctx, ns, "hello"); !strings.Contains(fmt.Sprint(got.Finalizers), "example.kctl.dev/configmap") {
		t.Errorf("finalizers = %v, want example.kctl.dev/configmap", got.Finalizers)
	}

	// A spec change reaches the ConfigMap and the status' observedGeneration.
	if err := kctl.RetryOnConflict(ctx, func() error {
		cur, err := widgets.Get(ctx, ns, "hello")
		if err != nil {
			return err
		}
		cur.Spec.Data = map[string]string{"greeting": "hello again"}
		return widgets.Update(ctx, cur)
	}); err != nil {
		t.Fatal(err)
	}
	wantReady(t, widgets, ns, "hello", 2)
	wantConfigMap(t, cms, w, map[string]string{"greeting": "hello again"})

	// The owned ConfigMap comes back when deleted (Owns).
	if err := cms.Delete(ctx, ns, "hello"); err != nil {
		t.Fatal(err)
	}
	wantConfigMap(t, cms, w, map[string]string{"greeting": "hello again"})

	// Deleting the Widget runs the finalizer: the ConfigMap goes first.
	if err := widgets.Delete(ctx, ns, "hello"); err != nil {
		t.Fatal(err)
	}
	wantGone(t, widgets, cms, ns, "hello")
}

func TestCRD_ConfigMapOfAnotherOwner_IsReportedAndNeverDeleted(t *testing.T) {
	env, ns := start(t, kctl.Options{})
	widgets, cms := clients(env)
	ctx := t.Context()

	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Data: map[string]string{"mine": "yes"}}
	if err := cms.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}}
	if err := widgets.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	kctltest.WaitFor(t, widgets, ns, "taken", func(w *Widget) bool {
		c := meta.FindStatusCondition(w.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "ConfigMapFailed"
	})
	if err := widgets.Delete(ctx, ns, "taken"); err != nil {
		t.Fatal(err)
	}
	kctltest.WaitFor(t, widgets, ns, "taken", func(w *Widget) bool { return w == nil })
	if got, err := cms.Get(ctx, ns, "taken"); err != nil || got.Data["mine"] != "yes" {
		t.Errorf("the other owner's ConfigMap: %v, %v; want it untouched", got, err)
	}
}

// TestCRD_RBAC_IsEnoughToRunWithLeaderElection runs the controller as the
// ServiceAccount of rbac.yaml, leader election on, as deployment.yaml does.
func TestCRD_RBAC_IsEnoughToRunWithLeaderElection(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, "crd.yaml", "rbac.yaml")
	ns := env.Namespace(t)
	lease := "widgets-test-" + strings.ToLower(rand.Text()[:8]) // a lease of its own: tests may run at once
	opts := kctl.Options{Config: env.ServiceAccount(t, "kctl-crd", "widgets")}
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		if err := mgr.ElectLeader(kctl.LeaderElection{Name: lease, Namespace: "kctl-crd"}); err != nil {
			t.Fatal(err)
		}
		setup(mgr)
	})
	widgets, cms := clients(env)

	w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac"}}
	w.Spec.Data = map[string]string{"k": "v"}
	if err := widgets.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	wantReady(t, widgets, ns, "rbac", 1)
	wantConfigMap(t, cms, w, map[string]string{"k": "v"})
	if err := widgets.Delete(t.Context(), ns, "rbac"); err != nil {
		t.Fatal(err)
	}
	wantGone(t, widgets, cms, ns, "rbac")
}

// TestCRD_DeploymentArgs_AreItsFlags parses deployment.yaml's args with
// crd's own flags: a renamed flag fails here, not in the cluster, and the
// logger they ask for can be made.
func TestCRD_DeploymentArgs_AreItsFlags(t *testing.T) {
	fs := flag.NewFlagSet("crd", flag.ContinueOnError)
	f := newFlags(fs)
	if err := kbflags.ParseDeploymentArgs(fs, "deployment.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Logger(io.Discard); err != nil {
		t.Error(err)
	}
	if !f.MetricsSecure || f.MetricsAddr != ":8443" || f.HealthAddr != ":8081" || !f.LeaderElect || f.LogFormat != "json" || f.webhookCertPath != "/certs" {
		t.Errorf("deployment.yaml's flags = %+v %+v, want secure metrics on :8443, probes on :8081, leader election, JSON logs, webhook certificate in /certs (the Secret's mount)", *f.Flags, *f)
	}
}

// kubectl apply --dry-run=server: the API server validates every field
// (strictly) and runs admission without storing anything.
func TestCRD_Manifests_PassServerDryRun(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, "crd.yaml", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: kctl-crd}")) // the manifests' namespace
	env.Kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-f", "crd.yaml", "-f", "rbac.yaml", "-f", "deployment.yaml", "-f", "webhook.yaml")
	env.Kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-n", env.Namespace(t), "-f", "widget.yaml")

	// With the caBundle filled in as main.go's sed line does.
	ca, err := certs.NewCA("dry run")
	if err != nil {
		t.Fatal(err)
	}
	fill := regexp.MustCompile(`# caBundle: CA_BUNDLE.*`)
	for _, name := range []string{"crd.yaml", "webhook.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		filled := fill.ReplaceAll(b, []byte("caBundle: "+base64.StdEncoding.EncodeToString(ca.PEM())))
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, filled, 0o644); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-f", path)
	}
}

// clients returns uncached clients for the test's own reads and writes.
func clients(env *kctltest.Env) (*kctl.Client[Widget], *kctl.Client[corev1.ConfigMap]) {
	return kctl.NewClient[Widget](env.Conn), kctl.NewClient[corev1.ConfigMap](env.Conn)
}

// wantReady waits until Widget ns/name says Ready=True for generation gen.
func wantReady(t *testing.T, widgets *kctl.Client[Widget], ns, name string, gen int64) {
	t.Helper()
	kctltest.WaitFor(t, widgets, ns, name, func(w *Widget) bool {
		if w == nil {
			return false
		}
		c := meta.FindStatusCondition(w.Status.Conditions, "Ready")
		return w.Generation == gen && w.Status.ObservedGeneration == gen && w.Status.ConfigMap == name &&
			c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen
	})
}

// wantConfigMap waits until w's ConfigMap holds data and is controlled by w.
func wantConfigMap(t *testing.T, cms *kctl.Client[corev1.ConfigMap], w *Widget, data map[string]string) {
	t.Helper()
	kctltest.WaitFor(t, cms, w.Namespace, w.Name, func(cm *corev1.ConfigMap) bool {
		return cm != nil && maps.Equal(cm.Data, data) && metav1.IsControlledBy(cm, w)
	})
}

// wantGone waits until the Widget and its ConfigMap ns/name are both gone.
func wantGone(t *testing.T, widgets *kctl.Client[Widget], cms *kctl.Client[corev1.ConfigMap], ns, name string) {
	t.Helper()
	kctltest.WaitFor(t, widgets, ns, name, func(w *Widget) bool { return w == nil })
	kctltest.WaitFor(t, cms, ns, name, func(cm *corev1.ConfigMap) bool { return cm == nil })
}

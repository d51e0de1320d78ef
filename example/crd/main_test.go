package main

import (
	"crypto/rand"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/example/internal/extest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { extest.Main(m) }

// installCRD applies crd.yaml for real (every test may) and waits until Widgets are served.
func installCRD(t *testing.T) {
	t.Helper()
	extest.Apply(t, "crd.yaml")
	extest.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.kctl.dev")
}

func TestCRD_WidgetGetsItsConfigMapStatusAndCleanup(t *testing.T) {
	installCRD(t)
	cfg := extest.Config(t)
	ns := extest.Namespace(t, cfg)
	mgr := extest.Manager(t, cfg, ns, kctl.Options{})
	setup(mgr)
	extest.Start(t, mgr)
	widgets, cms := clients(t, cfg)
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
	installCRD(t)
	cfg := extest.Config(t)
	ns := extest.Namespace(t, cfg)
	mgr := extest.Manager(t, cfg, ns, kctl.Options{})
	setup(mgr)
	extest.Start(t, mgr)
	widgets, cms := clients(t, cfg)
	ctx := t.Context()

	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Data: map[string]string{"mine": "yes"}}
	if err := cms.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}}
	if err := widgets.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	extest.Eventually(t, "Ready=False with reason ConfigMapFailed", func() string {
		got, err := widgets.Get(ctx, ns, "taken")
		if err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ConfigMapFailed" {
			return fmt.Sprintf("conditions %+v", got.Status.Conditions)
		}
		return ""
	})
	if err := widgets.Delete(ctx, ns, "taken"); err != nil {
		t.Fatal(err)
	}
	extest.Eventually(t, "Widget taken gone", func() string {
		if _, err := widgets.Get(ctx, ns, "taken"); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("Get: %v", err)
		}
		return ""
	})
	if got, err := cms.Get(ctx, ns, "taken"); err != nil || got.Data["mine"] != "yes" {
		t.Errorf("the other owner's ConfigMap: %v, %v; want it untouched", got, err)
	}
}

// TestCRD_RBAC_IsEnoughToRunWithLeaderElection runs the controller as the
// ServiceAccount of rbac.yaml, leader election on, as deployment.yaml does.
func TestCRD_RBAC_IsEnoughToRunWithLeaderElection(t *testing.T) {
	installCRD(t)
	admin := extest.Config(t)
	ns := extest.Namespace(t, admin)
	extest.Apply(t, "rbac.yaml")
	cfg := extest.ServiceAccountConfig(t, admin, "kctl-crd", "widgets")
	lease := "widgets-test-" + strings.ToLower(rand.Text()[:8]) // a lease of its own: tests may run at once
	mgr := extest.Manager(t, cfg, ns, kctl.Options{})
	if err := mgr.ElectLeader(kctl.LeaderElection{Name: lease, Namespace: "kctl-crd"}); err != nil {
		t.Fatal(err)
	}
	setup(mgr)
	extest.Start(t, mgr)
	widgets, cms := clients(t, admin)

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

func TestCRD_Manifests_PassServerDryRun(t *testing.T) {
	installCRD(t)
	extest.EnsureNamespace(t, extest.Config(t), "kctl-crd") // the manifests' namespace
	extest.DryRun(t, "crd.yaml", "rbac.yaml", "deployment.yaml")
	ns := extest.Namespace(t, extest.Config(t))
	extest.Kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-n", ns, "-f", "widget.yaml")
}

// clients returns uncached clients for the test's own reads and writes.
func clients(t *testing.T, cfg *rest.Config) (*kctl.Client[Widget], *kctl.Client[corev1.ConfigMap]) {
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kctl.NewClient[Widget](conn), kctl.NewClient[corev1.ConfigMap](conn)
}

// wantReady waits until Widget ns/name says Ready=True for generation gen.
func wantReady(t *testing.T, widgets *kctl.Client[Widget], ns, name string, gen int64) {
	t.Helper()
	extest.Eventually(t, fmt.Sprintf("Widget %s Ready=True at generation %d", name, gen), func() string {
		w, err := widgets.Get(t.Context(), ns, name)
		if err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(w.Status.Conditions, "Ready")
		if w.Generation != gen || w.Status.ObservedGeneration != gen || w.Status.ConfigMap != name ||
			c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gen {
			return fmt.Sprintf("generation %d, status %+v", w.Generation, w.Status)
		}
		return ""
	})
}

// wantConfigMap waits until w's ConfigMap holds data and is controlled by w.
func wantConfigMap(t *testing.T, cms *kctl.Client[corev1.ConfigMap], w *Widget, data map[string]string) {
	t.Helper()
	extest.Eventually(t, fmt.Sprintf("ConfigMap %s with %v, controlled by the Widget", w.Name, data), func() string {
		cm, err := cms.Get(t.Context(), w.Namespace, w.Name)
		if err != nil {
			return err.Error()
		}
		if !maps.Equal(cm.Data, data) || !metav1.IsControlledBy(cm, w) {
			return fmt.Sprintf("data %v, owners %+v", cm.Data, cm.OwnerReferences)
		}
		return ""
	})
}

// wantGone waits until the Widget and its ConfigMap ns/name are both gone.
func wantGone(t *testing.T, widgets *kctl.Client[Widget], cms *kctl.Client[corev1.ConfigMap], ns, name string) {
	t.Helper()
	extest.Eventually(t, "Widget and ConfigMap "+name+" gone", func() string {
		_, werr := widgets.Get(t.Context(), ns, name)
		_, cerr := cms.Get(t.Context(), ns, name)
		if !apierrors.IsNotFound(werr) || !apierrors.IsNotFound(cerr) {
			return fmt.Sprintf("Widget: %v; ConfigMap: %v", werr, cerr)
		}
		return ""
	})
}

package kctltest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With KCTLTEST_KUBECONFIG naming an existing cluster (here the control
// plane with a controller-manager, reached only through its kubeconfig),
// Start starts nothing; a test writes into the namespace Namespace made for
// it, which is deleted at its end and goes; and Apply refuses a
// cluster-scoped object or another namespace, naming the variable that
// allows it.
func TestExistingCluster_TestsWriteOnlyIntoTheirOwnNamespaces(t *testing.T) {
	cluster := kctltest.StartWithControllerManager(t)
	t.Setenv(kctltest.ClusterEnv, cluster.Kubeconfig)
	t.Setenv(kctltest.ContextEnv, "")
	t.Setenv(kctltest.ClusterWritesEnv, "")
	env := kctltest.Start(t)
	if env == cluster {
		t.Fatal("Start with KCTLTEST_KUBECONFIG set returned the control plane's own Env")
	}
	if again := kctltest.StartWithControllerManager(t); again != env {
		t.Error("StartWithControllerManager with KCTLTEST_KUBECONFIG set is not Start's Env of the existing cluster")
	}
	configMap := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	}
	cms := kctl.NewClient[corev1.ConfigMap](cluster.Conn)
	var ns string
	t.Run("a test", func(t *testing.T) {
		ns = env.Namespace(t)
		env.Apply(t, configMap(ns))
		if _, err := cms.Get(t.Context(), ns, "c"); err != nil {
			t.Errorf("the ConfigMap the test applied, read from the cluster: %v", err)
		}
	})
	namespaces := kctl.NewClient[corev1.Namespace](cluster.Conn)
	kctltest.Eventually(t, "the test's namespace deleted and gone", func() string {
		_, err := namespaces.Get(t.Context(), "", ns)
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("namespace %s: %v", ns, err)
	})

	msg := runFatal(t, func(tb kctltest.TB) { env.Apply(tb, "testdata/gadget-crd.yaml") })
	if !strings.Contains(msg, "cluster-scoped") || !strings.Contains(msg, kctltest.ClusterWritesEnv+"=true") {
		t.Errorf("Apply of a CRD to an existing cluster: %q, want a refusal naming %s", msg, kctltest.ClusterWritesEnv)
	}
	msg = runFatal(t, func(tb kctltest.TB) { env.Apply(tb, configMap("default")) })
	if !strings.Contains(msg, `namespace "default", which this test did not make`) {
		t.Errorf("Apply into namespace default of an existing cluster: %q, want a refusal", msg)
	}
	if _, err := cms.Get(t.Context(), "default", "c"); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap default/c after the refused Apply: %v, want NotFound", err)
	}
	msg = runFatal(t, func(tb kctltest.TB) { kctltest.StartWithFlags(tb, "--v=1") })
	if !strings.Contains(msg, "needs a kube-apiserver of its own") {
		t.Errorf("StartWithFlags on an existing cluster: %q, want a failure saying why", msg)
	}
}

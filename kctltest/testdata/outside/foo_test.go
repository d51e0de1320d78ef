package foo_test

import (
	"os"
	"testing"

	"example.com/foo"
	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// End to end, against a real kube-apiserver.
func TestFoo_GetsItsConfigMapAndStatus(t *testing.T) {
	getsItsConfigMapAndStatus(t, kctltest.Start(t))
}

// The same, against the in-memory server.
func TestFoo_GetsItsConfigMapAndStatus_InMemory(t *testing.T) {
	getsItsConfigMapAndStatus(t, kctltest.StartInMemory(t))
}

func getsItsConfigMapAndStatus(t *testing.T, env *kctltest.Env) {
	env.Apply(t, "testdata/foo-crd.yaml")
	ns := env.Namespace(t)
	env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, foo.Setup)

	foos := kctl.NewClient[foo.Foo](env.Conn)
	f := &foo.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
	f.Spec.Greeting = "hi"
	if err := foos.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	kctltest.WaitFor(t, foos, ns, "hello", func(f *foo.Foo) bool {
		return f != nil && f.Status.ConfigMap == "hello-greeting" && f.Status.ObservedGeneration == 1
	})
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	kctltest.WaitFor(t, cms, ns, "hello-greeting", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Data["greeting"] == "hi" && metav1.IsControlledBy(cm, f)
	})
	// The owned ConfigMap comes back when deleted (Owns).
	if err := cms.Delete(t.Context(), ns, "hello-greeting"); err != nil {
		t.Fatal(err)
	}
	kctltest.WaitFor(t, cms, ns, "hello-greeting", func(cm *corev1.ConfigMap) bool { return cm != nil })
}

// A unit test of the same reconcile, without a server.
func TestReconcile_WritesTheConfigMapThenTheStatus(t *testing.T) {
	f := &foo.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hello"}}
	f.Spec.Greeting = "hi"
	foos := kctltest.NewFakeClient(t, f)
	cms := kctltest.NewFakeClient[corev1.ConfigMap](t)

	if _, err := foo.Reconcile(foos, cms)(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	cm, err := cms.Get(t.Context(), "ns", "hello-greeting")
	if err != nil || cm.Data["greeting"] != "hi" || !metav1.IsControlledBy(cm, f) {
		t.Errorf("ConfigMap = %+v, %v; want greeting hi, controlled by the Foo", cm, err)
	}
	got, err := foos.Get(t.Context(), "ns", "hello")
	if err != nil || got.Status.ConfigMap != "hello-greeting" || got.Status.ObservedGeneration != 1 {
		t.Errorf("Foo status = %+v, %v; want configMap hello-greeting, observedGeneration 1", got.Status, err)
	}
}

package kctltest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// helperEnv makes this test binary, run again by a test, a helper process
// in which TestHelper_NoControlPlane runs.
const helperEnv = "KCTLTEST_HELPER"

func TestHelper_NoControlPlane(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("runs only as a helper process")
	}
	kctltest.Start(t) // skips: the helper has no control plane
}

// Main says how many tests were skipped for want of a control plane. The
// helper runs in a session of its own, without a terminal, so that Main
// writes to standard error, which this reads.
func TestMain_NoControlPlane_ReportsHowManyTestsSkipped(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelper_NoControlPlane$", "-test.count=2", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "CI=", "KCTL_CONTROLPLANE_BIN="+t.TempDir()) // holds no binaries
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper: %v, want it to pass with its tests skipped\n%s", err, out)
	}
	if want := "SKIPPED 2 INTEGRATION TESTS"; !strings.Contains(string(out), want) {
		t.Errorf("the helper's output lacks %q:\n%s", want, out)
	}
}

// gadget is the Go side of testdata/gadget-crd.yaml.
type gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		Seen int64 `json:"seen,omitempty"`
	} `json:"status,omitzero"`
}

var _ = kctl.Declare[gadget](kctl.Resource{Group: "kctltest.kctl.dev", Version: "v1", Kind: "Gadget", Namespaced: true})

func TestNamespace_IsFreshOnEveryCall(t *testing.T) {
	env := kctltest.Start(t)
	a := env.Namespace(t)
	b := env.Namespace(t)
	if a == b {
		t.Fatalf("Namespace returned %q twice", a)
	}
	namespaces := kctl.NewClient[corev1.Namespace](env.Conn)
	for _, ns := range []string{a, b} {
		if _, err := namespaces.Get(t.Context(), "", ns); err != nil {
			t.Errorf("Get namespace %s: %v", ns, err)
		}
	}
}

func TestNamespace_IsDeletedAtCleanup(t *testing.T) {
	env := kctltest.Start(t)
	var ns string
	t.Run("inner", func(t *testing.T) { ns = env.Namespace(t) })
	got, err := kctl.NewClient[corev1.Namespace](env.Conn).Get(t.Context(), "", ns)
	switch {
	case apierrors.IsNotFound(err):
		// deleted and finalized: fine
	case err != nil:
		t.Fatalf("reading namespace %s after its test: %v", ns, err)
	case got.DeletionTimestamp == nil:
		t.Errorf("namespace %s after its test: %+v, want it deleted (Terminating: nothing finalizes it)", ns, got.Status)
	}
}

// A CRD is served on return from Apply: a Gadget can be created at once.
func TestApply_CRDFile_IsServedOnReturn(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	g := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
	if err := kctl.NewClient[gadget](env.Conn).Create(t.Context(), g); err != nil {
		t.Fatalf("creating a Gadget right after Apply: %v", err)
	}
}

func TestApply_ObjectsAndBytes_CreateThenUpdate(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Data: map[string]string{"k": "1"}}
	env.Apply(t, cm, []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: %s}\n---\n", ns)))
	cm.Data["k"] = "2"
	env.Apply(t, cm)
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	if got, err := cms.Get(t.Context(), ns, "a"); err != nil || got.Data["k"] != "2" {
		t.Errorf("ConfigMap a = %v, %v; want data k=2", got, err)
	}
	if _, err := cms.Get(t.Context(), ns, "b"); err != nil {
		t.Errorf("ConfigMap b: %v", err)
	}
	env.Delete(t, cm)
	env.Delete(t, cm) // already gone: fine
	if _, err := cms.Get(t.Context(), ns, "a"); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap a after Delete: %v, want NotFound", err)
	}
}

// applyFailure runs Apply of manifest and returns its failure message, "" if none.
func applyFailure(t *testing.T, env *kctltest.Env, manifest any) string {
	tb := &fatalTB{TB: t, ctx: t.Context()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		env.Apply(tb, manifest)
	}()
	<-done
	return tb.msg
}

// Apply validates strictly: a field the schema lacks, or one given twice,
// fails. (Server-side apply refuses an unknown field in any case; without
// strict validation it would take the last of duplicates.)
func TestApply_UnknownOrDuplicateField_Fails(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	for _, c := range []struct{ name, spec, want string }{
		{"unknown", `{"size":1,"colour":"red"}`, "colour"},
		{"duplicate", `{"size":1,"size":2}`, "size"},
	} {
		manifest := fmt.Sprintf(`{"apiVersion":"kctltest.kctl.dev/v1","kind":"Gadget","metadata":{"name":%q,"namespace":%q},"spec":%s}`,
			c.name, ns, c.spec)
		msg := applyFailure(t, env, []byte(manifest))
		if !strings.Contains(msg, c.want) {
			t.Errorf("Apply of a Gadget with spec %s: failure %q, want one naming %s", c.spec, msg, c.want)
		}
	}
	list, err := kctl.NewClient[gadget](env.Conn).List(t.Context(), kctl.ListOptions{Namespace: ns})
	if err != nil || len(list) != 0 {
		t.Errorf("Gadgets in %s after the failed Applies: %v, %v; want none", ns, names(list), err)
	}
}

// A namespaced object without a namespace goes to "default", as with kubectl.
func TestApply_NoNamespace_GoesToDefault(t *testing.T) {
	env := kctltest.Start(t)
	name := env.Namespace(t) // a fresh name, though not used as a namespace here
	cm := []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {k: v}\n", name))
	env.Apply(t, cm)
	got, err := kctl.NewClient[corev1.ConfigMap](env.Conn).Get(t.Context(), "default", name)
	if err != nil || got.Data["k"] != "v" {
		t.Errorf("ConfigMap default/%s after Apply without a namespace = %v, %v; want data k=v", name, got, err)
	}
	env.Delete(t, cm)
}

func TestUnprivileged_MayDoWhatItsRulesAllowAndNothingElse(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	cfg := env.Unprivileged(t, rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}})
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kctl.NewClient[corev1.ConfigMap](conn).List(t.Context(), kctl.ListOptions{Namespace: ns}); err != nil {
		t.Errorf("listing ConfigMaps, which its rules allow: %v", err)
	}
	if _, err := kctl.NewClient[corev1.Secret](conn).List(t.Context(), kctl.ListOptions{Namespace: ns}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets, which no rule allows: %v, want Forbidden", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
	if err := kctl.NewClient[corev1.ConfigMap](conn).Create(t.Context(), cm); !apierrors.IsForbidden(err) {
		t.Errorf("creating a ConfigMap, which no rule allows: %v, want Forbidden", err)
	}
}

// The Manager runs the controller set up before it starts, and its logs go
// to the test's output.
func TestManager_RunsTheControllersOfSetup(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	opts := kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		gadgets := kctl.ClientFor[gadget](mgr)
		kctl.NewController(mgr, "gadgets", func(ctx context.Context, g *gadget) (kctl.Result, error) {
			g.Status.Seen = g.Generation
			return kctl.Result{}, gadgets.UpdateStatus(ctx, g)
		})
	})
	gadgets := kctl.NewClient[gadget](env.Conn)
	if err := gadgets.Create(t.Context(), &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}); err != nil {
		t.Fatal(err)
	}
	kctltest.WaitFor(t, gadgets, ns, "g", func(g *gadget) bool { return g != nil && g.Status.Seen == 1 })
}

func TestKubectl_TalksToTheControlPlane(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	if out := env.Kubectl(t, "get", "namespace", ns, "-o", "name"); strings.TrimSpace(out) != "namespace/"+ns {
		t.Errorf("kubectl get namespace %s = %q", ns, out)
	}
}

func TestConfig_IsACopy(t *testing.T) {
	env := kctltest.Start(t)
	cfg := env.Config()
	cfg.Host = "https://127.0.0.1:1"
	if env.Config().Host == cfg.Host {
		t.Error("changing the config Config returned changed the Env's")
	}
}

package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kbflags"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// page is the web page outside the cluster that the controller mirrors.
type page struct {
	mu   sync.Mutex
	body string
}

func (p *page) set(body string) { p.mu.Lock(); p.body = body; p.mu.Unlock() }

func (p *page) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprint(w, p.body)
}

// started runs the trigger controller for namespace ns as cfg (nil: the
// admin), mirroring a test page; it returns the page, the ticker channel and
// the endpoint's URL.
func started(t *testing.T, env *kctltest.Env, cfg *rest.Config, ns string) (*page, chan<- time.Time, string) {
	t.Helper()
	src := &page{body: "v1"}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	opts := kctl.Options{Config: cfg}
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	env.Manager(t, opts, func(mgr *kctl.Manager) {
		if err := setup(mgr, ns, srv.URL, ln, ticks); err != nil {
			t.Fatal(err)
		}
	})
	return src, ticks, "http://" + ln.Addr().String() + "/trigger"
}

// wantMirror waits until ConfigMap ns/mirror holds body.
func wantMirror(t *testing.T, cms *kctl.Client[corev1.ConfigMap], ns, step, body string) {
	t.Helper()
	t.Logf("%s: waiting for the mirror's body %q", step, body)
	kctltest.WaitFor(t, cms, ns, "mirror", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["body"] == body })
}

func post(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %s, want 202 Accepted", url, resp.Status)
	}
}

func TestTrigger_EverySourceReconcilesTheFixedKey(t *testing.T) {
	env := kctltest.Start(t)
	ns := env.Namespace(t)
	src, ticks, endpoint := started(t, env, nil, ns)
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	wantMirror(t, cms, ns, "first reconcile, from the Enqueue before Start", "v1")

	src.set("v2")
	ticks <- time.Now() // the filter sees the change and lets the tick through
	wantMirror(t, cms, ns, "tick after a change", "v2")

	src.set("v3")
	post(t, endpoint)
	wantMirror(t, cms, ns, "POST /trigger", "v3")

	// An edit of the mirror enqueues the key (Watches): it is put back.
	if err := kctl.RetryOnConflict(t.Context(), func() error {
		cm, err := cms.Get(t.Context(), ns, "mirror")
		if err != nil {
			return err
		}
		cm.Data["body"] = "edited by hand"
		return cms.Update(t.Context(), cm)
	}); err != nil {
		t.Fatal(err)
	}
	wantMirror(t, cms, ns, "edit of the mirror", "v3")
	if err := cms.Delete(t.Context(), ns, "mirror"); err != nil {
		t.Fatal(err)
	}
	wantMirror(t, cms, ns, "delete of the mirror", "v3")
}

// TestTrigger_RBAC_IsEnough runs the controller as the ServiceAccount of
// rbac.yaml, in the namespace it may write, as deployment.yaml does.
func TestTrigger_RBAC_IsEnough(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, "rbac.yaml")
	src, _, endpoint := started(t, env, env.ServiceAccount(t, "kctl-trigger", "trigger"), "kctl-trigger")
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	wantMirror(t, cms, "kctl-trigger", "initial reconcile", "v1")
	body := "run " + time.Now().String() // the namespace outlives the test: make this run's body unique
	src.set(body)
	post(t, endpoint)
	wantMirror(t, cms, "kctl-trigger", "POST /trigger", body)
}

func TestChanges_PassesOnlyTicksOnWhichThePageChanged(t *testing.T) {
	src := &page{body: "v1"}
	srv := httptest.NewServer(src)
	defer srv.Close()
	filter := changes(srv.URL)
	for i, step := range []struct {
		body   string // "" stops the server: the page cannot be read
		passes bool
	}{{"v1", true}, {"v1", false}, {"v2", true}, {"v2", false}, {"v1", true}, {"", false}} {
		if step.body == "" {
			srv.Close()
		}
		src.set(step.body)
		if got := filter(time.Now()); got != step.passes {
			t.Errorf("step %d: page %q: filter(tick) = %v, want %v", i, step.body, got, step.passes)
		}
	}
}

// TestTrigger_DeploymentArgs_AreItsFlags parses deployment.yaml's args with
// trigger's own flags: a renamed flag fails here, not in the cluster, and
// the logger they ask for can be made.
func TestTrigger_DeploymentArgs_AreItsFlags(t *testing.T) {
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	f := newFlags(fs)
	if err := kbflags.ParseDeploymentArgs(fs, "deployment.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Logger(io.Discard); err != nil {
		t.Error(err)
	}
	if !f.MetricsSecure || f.MetricsAddr != ":8443" || f.HealthAddr != ":8081" || f.LeaderElect || f.LogFormat != "json" || f.namespace != "kctl-trigger" {
		t.Errorf("deployment.yaml's flags = %+v %+v, want secure metrics on :8443, probes on :8081, no leader election (rbac.yaml grants no Lease), JSON logs, namespace kctl-trigger", *f.Flags, *f)
	}
}

// kubectl apply --dry-run=server: the API server validates every field
// (strictly) and runs admission without storing anything.
func TestTrigger_Manifests_PassServerDryRun(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: kctl-trigger}")) // the manifests' namespace
	env.Kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-f", "rbac.yaml", "-f", "deployment.yaml")
}

package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/example/internal/extest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { extest.Main(m) }

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

// started runs the trigger controller for namespace ns as cfg, mirroring a
// test page; it returns the page, the ticker channel and the endpoint's URL.
func started(t *testing.T, cfg *rest.Config, ns string) (*page, chan<- time.Time, string) {
	t.Helper()
	src := &page{body: "v1"}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	mgr := extest.Manager(t, cfg, ns, kctl.Options{})
	if err := setup(mgr, ns, srv.URL, ln, ticks); err != nil {
		t.Fatal(err)
	}
	extest.Start(t, mgr)
	return src, ticks, "http://" + ln.Addr().String() + "/trigger"
}

// wantMirror waits until ConfigMap ns/mirror holds body.
func wantMirror(t *testing.T, cms *kctl.Client[corev1.ConfigMap], ns, step, body string) {
	t.Helper()
	extest.Eventually(t, fmt.Sprintf("%s: mirror body %q", step, body), func() string {
		cm, err := cms.Get(t.Context(), ns, "mirror")
		if err != nil {
			return err.Error()
		}
		if cm.Data["body"] != body {
			return fmt.Sprintf("body %q", cm.Data["body"])
		}
		return ""
	})
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
	cfg := extest.Config(t)
	ns := extest.Namespace(t, cfg)
	src, ticks, endpoint := started(t, cfg, ns)
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := kctl.NewClient[corev1.ConfigMap](conn)
	wantMirror(t, cms, ns, "initial reconcile of the namespace", "v1")

	src.set("v2")
	ticks <- time.Now() // the filter sees the change and lets the tick through
	wantMirror(t, cms, ns, "tick after a change", "v2")

	src.set("v3")
	post(t, endpoint)
	wantMirror(t, cms, ns, "POST /trigger", "v3")

	// An edit of the mirror maps to the fixed key: it is put back.
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
	admin := extest.Config(t)
	extest.Apply(t, "rbac.yaml")
	cfg := extest.ServiceAccountConfig(t, admin, "kctl-trigger", "trigger")
	src, _, endpoint := started(t, cfg, "kctl-trigger")
	conn, err := kctl.NewConn(admin)
	if err != nil {
		t.Fatal(err)
	}
	cms := kctl.NewClient[corev1.ConfigMap](conn)
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

func TestTrigger_Manifests_PassServerDryRun(t *testing.T) {
	extest.EnsureNamespace(t, extest.Config(t), "kctl-trigger") // the manifests' namespace
	extest.DryRun(t, "rbac.yaml", "deployment.yaml")
}

package kctltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/controlplane"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Main runs the tests of m and then stops the control plane, if a test
// started one, and says on the terminal (on standard error without one) how
// many tests were skipped for want of one. It returns the exit code for
// os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }
//
// Setup functions, if any, run once before the tests, in order, with the
// control plane started: the place for what every test needs, such as
// CRDs. Their t stands for the whole test binary: its cleanups run after
// the last test, and a failure (t.Fatal, or an error returned) runs no test
// and makes the exit code 1. When the control plane cannot start, setup
// does not run and the tests skip or fail as Start says.
//
//	func TestMain(m *testing.M) {
//		os.Exit(kctltest.Main(m, func(t kctltest.TB, env *kctltest.Env) error {
//			env.Apply(t, "config/crd/bases")
//			return nil
//		}))
//	}
//
// klog's lines (client-go's own log: request logs at -v=6, warnings) belong
// to no test, since klog is process-wide and Go cannot tell which test made
// a line: Main keeps them out of every test's output, and prints them (the
// last MiB) on standard error after the last test, between two lines
// "--- kctltest: klog's lines" and "--- kctltest: end of klog's lines", or,
// with KCTLTEST_KLOG=FILE set, appends them to FILE. go test shows them
// with -v or when the package fails, as it shows a test's log.
//
// Start fails the tests of a package with no TestMain, or one that does not
// call Main, with this line in the message.
func Main(m *testing.M, setup ...func(t TB, env *Env) error) int {
	klogs := klogRoute()
	s := newSuite()
	before := func() error {
		for _, f := range setup {
			err := s.run(f)
			if s.skippedWhy() != "" {
				return nil // the tests skip too
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	after := func() {
		s.close()
		klogs.flush(os.Stderr)
	}
	return controlplane.RunTestsWith(m, before, after)
}

// TB is what kctltest needs of a test: *testing.T, *testing.B, testing.TB
// and Ginkgo's GinkgoT() all have it, so that
//
//	env := kctltest.Start(GinkgoT())
//
// works in a Ginkgo suite as kctltest.Start(t) does in a test function (see
// the package doc, With Ginkgo). Logger writes to the test's Output() when
// it has one, else through Logf.
type TB interface {
	Helper()
	Name() string
	Context() context.Context
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

// Env is the control plane of a test binary: an etcd and a kube-apiserver
// on loopback with token authentication, RBAC and a self-signed serving
// certificate, and no scheduler or nodes. Start's has no controller-manager:
// nothing is garbage-collected and namespaces are never finalized, so give
// each test a namespace of its own (Namespace) and never wait for a cascade;
// StartWithControllerManager's runs the garbage collector and the namespace
// controller. All tests of the binary share it, and each package's test
// binary has its own; its methods are safe for concurrent use by parallel
// tests.
type Env struct {
	// Kubeconfig is the path of the admin's kubeconfig (group
	// system:masters), e.g. for a command the test runs.
	Kubeconfig string
	// Conn is a connection as the admin, for the test's own uncached clients:
	//
	//	widgets := kctl.NewClient[Widget](env.Conn)
	Conn *kctl.Conn

	cluster  *controlplane.Cluster // nil in memory and on an existing cluster
	mem      *memServer            // the in-memory server (StartInMemory); nil with a control plane
	existing bool                  // an existing cluster, named by ClusterEnv
	cfg      *rest.Config
	// mu guards namespaces: on an existing cluster, those Namespace made,
	// into which Apply and Delete may write (mayWrite).
	mu         sync.Mutex
	namespaces map[string]bool
	http       *http.Client
	discovery  discovery
}

var env struct {
	once sync.Once
	e    *Env
	err  error
}

// Start returns the test binary's control plane, starting it on first use:
// about 5 s when its binaries are built. They are taken from
// $KCTL_CONTROLPLANE_BIN when set, else from the per-user cache
// (os.UserCacheDir()/kctl/...), where the first use builds them with the Go
// module proxy (several minutes: progress shows on the terminal; concurrent
// test binaries wait for one build). The processes stop, and their folder
// (etcd's data, private keys) is removed, when the test binary ends, however
// it ends: see the package doc. t may be GinkgoT() (see TB).
//
// When it cannot start, t fails with the reason if $CI is true; otherwise t
// is skipped, with one loud line on the terminal saying why and how to fix it.
//
// With $KCTLTEST_KUBECONFIG set, it returns an Env on that existing cluster
// instead, and starts nothing (see ClusterEnv).
func Start(t TB) *Env {
	t.Helper()
	klogRoute()
	if kubeconfig := os.Getenv(ClusterEnv); kubeconfig != "" {
		return existingEnv(t, kubeconfig)
	}
	c := controlplane.Require(t)
	env.once.Do(func() { env.e, env.err = newEnv(c) })
	if env.err != nil {
		t.Fatalf("kctltest: %v", env.err)
	}
	return env.e
}

// flaggedEnvs are the Envs of StartWithFlags and StartWithControllerManager, by cluster.
var flaggedEnvs struct {
	mu   sync.Mutex
	envs map[*controlplane.Cluster]*Env
}

// StartWithFlags is Start for a control plane whose kube-apiserver also
// gets apiFlags, e.g.
//
//	env := kctltest.StartWithFlags(t, "--feature-gates=ShardedListAndWatch=true")
//
// The test binary starts one such control plane per distinct flag list, on
// first use (about 5 s more), besides Start's, and stops them all with
// Start's. With no flags it is Start.
func StartWithFlags(t TB, apiFlags ...string) *Env {
	t.Helper()
	if len(apiFlags) == 0 {
		return Start(t)
	}
	if kubeconfig := os.Getenv(ClusterEnv); kubeconfig != "" {
		t.Fatalf("kctltest: StartWithFlags(%s) needs a kube-apiserver of its own, and %s=%s names an existing cluster: run this test without it",
			strings.Join(apiFlags, " "), ClusterEnv, kubeconfig)
	}
	klogRoute()
	c := controlplane.RequireFlags(t, apiFlags...)
	return otherEnv(t, c)
}

// StartWithControllerManager is Start for a control plane that also runs
// kube-controller-manager, with only its garbage collector and namespace
// controller: owner references cascade (background, foreground, orphan) and
// a deleted namespace empties and goes, as in a cluster, while no other
// controller acts on the test's objects (a ReplicaSet makes no Pods).
//
//	env := kctltest.StartWithControllerManager(t)
//	// delete an owner, then WaitFor its dependents to go
//
// The test binary starts one such control plane on first use (about 5 s
// more than Start's), besides Start's, and stops it with Start's.
// kube-controller-manager, of the same version as kube-apiserver, is built
// on first use beside the other binaries (about 3 CPU-minutes more; `go run
// github.com/kctl-dev/kctl/hack/controlplane build -controller-manager`
// builds it ahead). A cascade is asynchronous, as in a cluster: wait for it
// (WaitFor, Eventually), with WaitTimeout's bound; the garbage collector
// sees a CRD made after it started within about 30 s (its discovery period).
// With $KCTLTEST_KUBECONFIG set, it is Start: the existing cluster has a
// controller-manager of its own.
func StartWithControllerManager(t TB) *Env {
	t.Helper()
	if kubeconfig := os.Getenv(ClusterEnv); kubeconfig != "" {
		return Start(t)
	}
	klogRoute()
	c := controlplane.RequireControllerManager(t)
	return otherEnv(t, c)
}

// otherEnv returns the Env of c, a control plane besides Start's, making it
// on first use.
func otherEnv(t TB, c *controlplane.Cluster) *Env {
	t.Helper()
	flaggedEnvs.mu.Lock()
	defer flaggedEnvs.mu.Unlock()
	e := flaggedEnvs.envs[c]
	if e != nil {
		return e
	}
	e, err := newEnv(c)
	if err != nil {
		t.Fatalf("kctltest: %v", err)
	}
	if flaggedEnvs.envs == nil {
		flaggedEnvs.envs = map[*controlplane.Cluster]*Env{}
	}
	flaggedEnvs.envs[c] = e
	return e
}

func newEnv(c *controlplane.Cluster) (*Env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("loading the control plane's kubeconfig: %w", err)
	}
	e, err := envFor(cfg, c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	e.cluster = c
	return e, nil
}

// envFor makes the Env of the API server cfg reaches, as the kubeconfig's user.
func envFor(cfg *rest.Config, kubeconfig string) (*Env, error) {
	cfg.QPS = 100
	cfg.Burst = 200
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	e := &Env{Kubeconfig: kubeconfig, Conn: conn, cfg: cfg, http: hc}
	e.discovery.env = e
	return e, nil
}

// Config returns a new config for the admin (group system:masters), with a
// client-side rate limit of 100 QPS (burst 200). Change the copy as you like.
func (e *Env) Config() *rest.Config { return rest.CopyConfig(e.cfg) }

// Kubectl runs kubectl (built with the control plane, of the same version;
// on an existing cluster, the one on $PATH) with args as the admin and
// returns its standard output and error. A failure fails t with that output.
//
//	env.Kubectl(t, "get", "widgets", "-n", ns, "-o", "yaml")
func (e *Env) Kubectl(t TB, args ...string) string {
	t.Helper()
	e.needsControlPlane(t, "Kubectl")
	kubectl := "kubectl"
	if e.cluster != nil {
		kubectl = filepath.Join(e.cluster.Bin, "kubectl")
	}
	if e.existing && os.Getenv(ContextEnv) != "" {
		args = append([]string{"--context=" + os.Getenv(ContextEnv)}, args...)
	}
	cmd := exec.CommandContext(t.Context(), kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kctltest: kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Namespace creates a namespace named after the test ("test-name-1a2b3c")
// and returns its name. It is deleted at the end of the test; with no
// controller-manager (Start) its objects stay in etcd, where nothing sees
// them.
func (e *Env) Namespace(t TB) string {
	t.Helper()
	suffix := make([]byte, 3)
	rand.Read(suffix)
	base := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	base = strings.Trim(base[:min(len(base), 50)], "-")
	if base == "" {
		base = "test" // a Ginkgo BeforeSuite has no name
	}
	name := base + "-" + hex.EncodeToString(suffix)
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name)
	e.mustDo(t, http.StatusCreated, "POST", "/api/v1/namespaces", "application/json", body)
	e.mu.Lock()
	if e.namespaces != nil {
		e.namespaces[name] = true
	}
	e.mu.Unlock()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.do(ctx, "DELETE", "/api/v1/namespaces/"+name, "", "")
	})
	return name
}

// RestartAPIServer kills kube-apiserver (SIGKILL, as in a crash) and starts
// a new one on the same address with the same etcd, so the same objects:
// every client sees its connections and watches break, and must reconnect.
// It returns once the new one is ready (at most 2 minutes); an error fails
// t. The control plane is the test binary's: parallel tests see the
// restart too.
func (e *Env) RestartAPIServer(t TB) {
	t.Helper()
	if !e.needsControlPlane(t, "RestartAPIServer") {
		return
	}
	if e.cluster == nil {
		t.Fatalf("kctltest: RestartAPIServer needs a kube-apiserver of kctltest's own, and %s names an existing cluster: run this test without it", ClusterEnv)
	}
	if err := e.cluster.RestartAPIServer(t.Context()); err != nil {
		t.Fatalf("kctltest: restarting kube-apiserver: %v", err)
	}
}

// do sends one request as the admin and returns the status code and body.
func (e *Env) do(ctx context.Context, method, path, contentType, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(e.cfg.Host, "/")+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// mustDo is do that fails t unless the answer has status want.
func (e *Env) mustDo(t TB, want int, method, path, contentType, body string) []byte {
	t.Helper()
	code, b, err := e.do(t.Context(), method, path, contentType, body)
	if err != nil {
		t.Fatalf("kctltest: %s %s: %v", method, path, err)
	}
	if code != want {
		t.Fatalf("kctltest: %s %s = %d %s, want %d", method, path, code, b, want)
	}
	return b
}

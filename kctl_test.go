package kctl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// testManager makes a Manager whose cache holds only namespace ns.
func testManager(t *testing.T, cfg *rest.Config, ns string, opts Options) *Manager {
	t.Helper()
	opts.Config = cfg
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m, err := NewManager(opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

// testWriter sends log lines to t.Log, so they show with the failing test only.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// startManager runs m.Start in the background. stop cancels it and returns
// what Start returned; it also runs at the end of the test.
func startManager(t *testing.T, m *Manager) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				err = errors.New("Manager.Start did not return 60s after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Manager.Start returned %v", err)
		}
	})
	return stop
}

func TestManager_GracefulShutdown_DrainsSlowReconcile(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: 20 * time.Second})
	cms := ClientFor[corev1.ConfigMap](mgr)
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	c := NewController(mgr, "slow", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		finished.Store(true)
		return Result{}, nil
	})
	stop := startManager(t, mgr)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}); err != nil {
		t.Fatal(err)
	}
	<-started
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, "the queue shutting down", q.ShuttingDown)
	select {
	case err := <-stopped:
		t.Fatalf("Start returned (%v) while a reconcile was still running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Start returned %v after a graceful shutdown", err)
	}
	if !finished.Load() {
		t.Error("the in-flight reconcile did not finish before Start returned")
	}
}

func mustConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestManager_BuilderMistakes_AreReturnedByStart(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	type unknown struct {
		metav1.TypeMeta
		metav1.ObjectMeta
	}
	NewController(mgr, "bad", func(ctx context.Context, u *unknown) (Result, error) { return Result{}, nil })
	NewController(mgr, "zero", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil }).MaxConcurrentReconciles(0)
	err := mgr.Start(startCheckCtx(t))
	if err == nil {
		t.Fatal("Start succeeded with an undeclared type and 0 workers")
	}
	for _, want := range []string{`controller "bad"`, "kctl.Declare", "MaxConcurrentReconciles(0)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not mention %q", err, want)
		}
	}
}

func TestManager_OptIns_FailAfterStartAndElectLeaderChecksItsConfig(t *testing.T) {
	mgr, err := NewManager(Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, // never contacted
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(mgr.ServeMetrics(""), mgr.ServeHealth("")); err != nil || mgr.everywhere.Len() != 0 {
		t.Errorf(`ServeMetrics("") and ServeHealth("") = %v and added %d runnables, want nil and none`, err, mgr.everywhere.Len())
	}
	if err := mgr.ElectLeader(LeaderElection{Name: "x", Namespace: "ns", RetryPeriod: time.Hour}); err == nil || !strings.Contains(err.Error(), "RetryPeriod") {
		t.Errorf("ElectLeader with RetryPeriod > RenewDeadline = %v, want an error naming RetryPeriod", err)
	}
	if err := mgr.ElectLeader(LeaderElection{Name: "x", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.ElectLeader(LeaderElection{Name: "y", Namespace: "ns"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a second ElectLeader = %v, want an error saying it was called twice", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("Start with an ended context = %v, want nil", err)
	}
	for call, err := range map[string]error{
		"ServeMetrics": mgr.ServeMetrics("127.0.0.1:0"),
		"ServeHealth":  mgr.ServeHealth("127.0.0.1:0"),
		"ElectLeader":  mgr.ElectLeader(LeaderElection{Name: "x", Namespace: "ns"}),
	} {
		if err == nil || !strings.Contains(err.Error(), "after Start") {
			t.Errorf("%s after Start = %v, want an error saying so", call, err)
		}
	}
}

// TestManager_OptIns_AreLinkedOnlyWhenCalled builds two small programs and
// looks for the code of metrics, probes, leader election and Events in them:
// absent from one that calls none of them, present in one that calls all. A
// runtime `if` in the Manager instead of a call would link them into every
// program (about 0.6 MB of a stripped binary).
func TestManager_OptIns_AreLinkedOnlyWhenCalled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	optIns := []string{ // part of the name of a function of each (inlined ones are named after their caller too)
		"metrics.(*Registry).Page",
		"(*Checks).Handler.func1", // internal/health's handler
		"election.(*Elector).Run",
		"(*EventRecorder).deliver",
		"net/http.(*Server).Serve",
	}
	const program = `package main

import (
	"context"

	"github.com/kctl-dev/kctl"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	mgr, _ := kctl.NewManager(kctl.Options{})
	kctl.NewController(mgr, "c", func(context.Context, *corev1.ConfigMap) (kctl.Result, error) { return kctl.Result{}, nil })
	%s
	mgr.Start(context.Background())
}
`
	for _, tc := range []struct {
		name, calls string
		linked      bool
	}{
		{"none", "", false},
		{"all", `mgr.ServeMetrics(":1"); mgr.ServeHealth(":2"); mgr.ElectLeader(kctl.LeaderElection{Name: "l"})
	mgr.EventRecorder("c")`, true},
	} {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"go.work":      "go 1.26.0\n\nuse (\n\t" + strconv.Quote(root) + "\n\t./prog\n)\n",
			"prog/go.mod":  "module prog\n\ngo 1.26.0\n",
			"prog/main.go": fmt.Sprintf(program, tc.calls),
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "prog.bin"), ".")
		build.Dir, build.Env = filepath.Join(dir, "prog"), append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the program calling %s: %v\n%s", tc.name, err, out)
		}
		nm, err := exec.Command("go", "tool", "nm", filepath.Join(dir, "prog.bin")).Output()
		if err != nil {
			t.Fatalf("go tool nm: %v", err)
		}
		for _, sym := range optIns {
			if linked := strings.Contains(string(nm), sym); linked != tc.linked {
				t.Errorf("a program calling %s of the opt-ins: %s linked = %v, want %v", tc.name, sym, linked, tc.linked)
			}
		}
	}
}

// eventually polls cond until it holds, failing the test after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer collects log output from many goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// linesEventually waits until at least n logged lines contain substr (the
// cache logs after it has released its lock, so a line may trail the event
// or the sync it is about) and returns them.
func (b *logBuffer) linesEventually(t *testing.T, substr string, n int) []string {
	t.Helper()
	eventually(t, fmt.Sprintf("%d log lines containing %q", n, substr), func() bool { return len(b.lines(substr)) >= n })
	return b.lines(substr)
}

// lines returns the logged lines that contain substr.
func (b *logBuffer) lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// Floor 1 is read first and on its own: doc.go's reading order promises
// that each of its files uses only the files before it, so that a reader
// can stop after any. The structure tool checks the uses it can see; this
// checks the rest (a type that satisfies an interface through a method in a
// later file): each prefix of floor 1, from doc.go's numbered list, must
// type-check without the files after it.
func TestFloorOne_EachPrefixCompilesWithoutTheFilesAfterIt(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	order := regexp.MustCompile(`(?m)^//\s+\d+\.\s+(\w+\.go):`)
	start := bytes.Index(doc, []byte("# Reading order"))
	end := bytes.Index(doc, []byte("# Floor 2"))
	if start < 0 || end < start {
		t.Fatal("doc.go has no \"# Reading order\" before \"# Floor 2\"")
	}
	var files []string
	for _, m := range order.FindAllSubmatch(doc[start:end], -1) {
		files = append(files, string(m[1]))
	}
	if len(files) < 10 {
		t.Fatalf("doc.go's reading order names %d files: %v", len(files), files)
	}
	list := exec.Command("go", "list", "-export", "-deps",
		"-f", "{{.ImportPath}}\t{{.Export}}", ".")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
	}
	fset := token.NewFileSet()
	lookup := func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	}
	imports := importer.ForCompiler(fset, "gc", lookup)
	var prefix []*ast.File
	for i, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		prefix = append(prefix, f)
		conf := types.Config{Importer: imports}
		_, err = conf.Check("github.com/kctl-dev/kctl", fset, prefix, nil)
		if err != nil {
			t.Fatalf("floor 1 up to %s (%d of %d files) does not compile "+
				"without the files after it: %v", name, i+1, len(files), err)
		}
	}
}

// Issue 25, item 4: a controller name is taken once per Manager.
func TestManager_TwoControllersWithOneName_StartNamesBoth(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	NewController(mgr, "same", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	NewController(mgr, "same", func(ctx context.Context, s *corev1.Secret) (Result, error) { return Result{}, nil })
	err := mgr.Start(startCheckCtx(t))
	if err == nil {
		t.Fatal("Start succeeded with two controllers named \"same\"")
	}
	for _, want := range []string{`two controllers are named "same"`, "one of ConfigMap, made at kctl_test.go:", "one of Secret, made at kctl_test.go:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error %q does not mention %q", err, want)
		}
	}
}

// Helpers for integration tests. They use this test binary's control plane
// (internal/controlplane, the engine of package kctltest, which kctl's own
// internal tests cannot import: it imports kctl), started on first use. When
// it cannot start, an integration test skips, loudly, or fails when CI=true:
// CI must never skip one.
//
// There is no controller-manager: namespaces are never finalized and nothing
// is garbage-collected. Work in a namespace of your own (testNamespace) and
// never wait for a deletion cascade.
//
// These helpers use client-go's rest and net/http only, never kctl's client,
// so that they stay trustworthy while kctl's client is under test.

func TestMain(m *testing.M) {
	if os.Getenv(signalHelperEnv) != "" {
		signalHelper() // before RunTests, whose own SIGINT handler would stop the process
	}
	if id := os.Getenv(shardMemberEnv); id != "" {
		os.Exit(shardMemberMain(id)) // a member process of shard_process_test.go
	}
	os.Exit(controlplane.RunTests(m))
}

// testConfig returns a new config for the control plane's admin (group
// system:masters). Its rate limit is raised to 100 QPS (burst 200); change
// the copy as you like.
func testConfig(t *testing.T) *rest.Config {
	t.Helper()
	return testLoadConfig(t, controlplane.Require(t).Kubeconfig())
}

// noServer is the config of a Manager that never contacts a server: a
// test that needs none starts no control plane. Nothing answers on port 1.
func noServer() *rest.Config {
	return &rest.Config{Host: "http://127.0.0.1:1"}
}

// startCheckCtx bounds a Start that must fail its checks at once: were
// it to go on, it would wait for a server that never answers, and the
// test fails with the deadline rather than hanging.
func startCheckCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testUnprivilegedConfig returns a new config for user "kctl-unprivileged",
// who has no RBAC rights: every request for a resource is Forbidden.
func testUnprivilegedConfig(t *testing.T) *rest.Config {
	t.Helper()
	return testLoadConfig(t, controlplane.Require(t).UnprivilegedKubeconfig())
}

func testLoadConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("loading the control plane's kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// testNamespace creates a new namespace "kctl-test-<test name>-<random>" and
// returns its name. It is never deleted: nothing would finalize it.
func testNamespace(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	suffix := make([]byte, 3)
	rand.Read(suffix)
	base := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	name := "kctl-test-" + strings.Trim(base[:min(len(base), 30)], "-") + "-" + hex.EncodeToString(suffix)
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name)
	if code, resp := testRawRequest(t, cfg, "POST", "/api/v1/namespaces", body); code != http.StatusCreated {
		t.Fatalf("creating namespace %s: %d %s", name, code, resp)
	}
	return name
}

// testRawRequest sends one request with cfg's credentials and JSON body (none
// if ""), and returns the status code and the response body.
func testRawRequest(t *testing.T, cfg *rest.Config, method, path, body string) (int, []byte) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(cfg.Host, "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// etcdCompact compacts etcd up to its current revision, dropping every older
// revision as the API server's own compaction (every 5 minutes) would, and
// returns that revision. The API server's watch cache still serves watches
// and exact lists from older resourceVersions; after restartAPIServer they
// fail with 410 Expired ("too old resource version").
func etcdCompact(t *testing.T) int64 {
	t.Helper()
	url := controlplane.Require(t).EtcdURL
	var current struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	etcdPost(t, url+"/v3/kv/range", `{"key":"AA=="}`, &current) // any key: the header tells the revision
	rev := current.Header.Revision
	etcdPost(t, url+"/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, rev), nil)
	return rev
}

// etcdPost sends body to etcd's JSON gateway and decodes the answer into out.
func etcdPost(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("etcd %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s %s", url, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("etcd %s: %v in %s", url, err, b)
		}
	}
}

// restartAPIServer stops kube-apiserver and starts it again on the same port,
// returning once it is ready: open connections and watches break. Every test
// running at the time sees it, so do not call it from a parallel test.
func restartAPIServer(t *testing.T) {
	t.Helper()
	if err := controlplane.Require(t).RestartAPIServer(t.Context()); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
}

// testCRDAbsent deletes the CRD plural.group if an earlier run left it, waits
// (30 s at most) until neither it nor its API in namespace ns is served (the
// API outlives the CRD object for a moment), and returns a func that deletes
// it again. Defer that func: at t.Cleanup, t.Context() has ended.
func testCRDAbsent(t *testing.T, cfg *rest.Config, ns, group, version, plural string) (deleteAgain func()) {
	t.Helper()
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + plural + "." + group
	apiPath := "/apis/" + group + "/" + version + "/namespaces/" + ns + "/" + plural
	gone := func() bool {
		crd, _ := testRawRequest(t, cfg, "GET", crdPath, "")
		api, _ := testRawRequest(t, cfg, "GET", apiPath, "")
		return crd == 404 && api == 404
	}
	testRawRequest(t, cfg, "DELETE", crdPath, "")
	deadline := time.Now().Add(30 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s.%s of an earlier run is still served after 30s", plural, group)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return func() { testRawRequest(t, cfg, "DELETE", crdPath, "") }
}

// Integration tests of the test helpers in testenv_test.go and of the control
// plane that internal/controlplane starts.

func TestControlPlane_TestNamespace_IsFreshOnEveryCall(t *testing.T) {
	cfg := testConfig(t)
	a, b := testNamespace(t, cfg), testNamespace(t, cfg)
	if a == b {
		t.Fatalf("testNamespace returned %q twice", a)
	}
	for _, ns := range []string{a, b} {
		if code, body := testRawRequest(t, cfg, "GET", "/api/v1/namespaces/"+ns, ""); code != http.StatusOK {
			t.Errorf("GET namespace %s = %d %s, want 200", ns, code, body)
		}
	}
}

func TestControlPlane_UnprivilegedUser_IsForbiddenToListPods(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	path := "/api/v1/namespaces/" + ns + "/pods"
	if code, body := testRawRequest(t, testUnprivilegedConfig(t), "GET", path, ""); code != http.StatusForbidden {
		t.Errorf("unprivileged GET %s = %d %s, want 403", path, code, body)
	}
	if code, body := testRawRequest(t, testConfig(t), "GET", path, ""); code != http.StatusOK {
		t.Errorf("admin GET %s = %d %s, want 200", path, code, body)
	}
}

// No controller-manager creates the "default" ServiceAccount; pods must be
// accepted all the same.
func TestControlPlane_Pod_IsCreatedWithoutServiceAccount(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	if code, body := testRawRequest(t, cfg, "POST", "/api/v1/namespaces/"+ns+"/pods", pod); code != http.StatusCreated {
		t.Fatalf("creating a pod = %d %s, want 201", code, body)
	}
}

// After a compaction the API server's watch cache still serves older
// resourceVersions; a restart empties it, and they are gone (410 Expired).
func TestControlPlane_EtcdCompactAndRestart_EndsWatchesAndExpiresOldResourceVersions(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	oldRV := createConfigMap(t, cfg, ns, "before")
	createConfigMap(t, cfg, ns, "later")
	watchEnded := openWatch(t, cfg, path+"?watch=true")

	etcdCompact(t)
	restartAPIServer(t)

	select {
	case <-watchEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch opened before the restart is still open 30 s after it")
	}
	code, body := testRawRequest(t, cfg, "GET", path+"?watch=true&timeoutSeconds=1&resourceVersion="+oldRV, "")
	if code != http.StatusOK || !strings.Contains(string(body), `"code":410`) {
		t.Errorf("watch from resourceVersion %s = %d %s, want an ERROR event with code 410", oldRV, code, body)
	}
	createConfigMap(t, cfg, ns, "after")
}

// createConfigMap creates an empty configmap and returns its resourceVersion.
func createConfigMap(t *testing.T, cfg *rest.Config, ns, name string) string {
	t.Helper()
	cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name)
	code, body := testRawRequest(t, cfg, "POST", "/api/v1/namespaces/"+ns+"/configmaps", cm)
	if code != http.StatusCreated {
		t.Fatalf("creating configmap %s/%s = %d %s, want 201", ns, name, code, body)
	}
	var created struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	return created.Metadata.ResourceVersion
}

// openWatch starts a watch and returns a channel closed when its stream ends.
func openWatch(t *testing.T, cfg *rest.Config, path string) <-chan struct{} {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("watch %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %s", path, resp.Status)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		}
	}()
	return ended
}

func TestControlPlane_EtcdCompact_DropsOlderRevisionsInEtcd(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	oldRV := createConfigMap(t, cfg, ns, "before")
	createConfigMap(t, cfg, ns, "later")

	rev := etcdCompact(t)

	if old, _ := strconv.ParseInt(oldRV, 10, 64); rev <= old {
		t.Fatalf("etcdCompact() = %d, want a revision after %s", rev, oldRV)
	}
	url := controlplane.Require(t).EtcdURL + "/v3/kv/range"
	resp, err := http.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"key":"AA==","revision":%q}`, oldRV)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(answer), "compacted") {
		t.Errorf("etcd range at revision %s after compaction = %s %s, want a compacted error", oldRV, resp.Status, answer)
	}
}

// grantUnprivileged lets user kctl-unprivileged do what rule (an RBAC
// PolicyRule's JSON) allows in namespace ns, through a Role and a
// RoleBinding named name.
func grantUnprivileged(t *testing.T, admin *rest.Config, ns, name, rule string) {
	t.Helper()
	role := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":%q},"rules":[%s]}`, name, rule)
	binding := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":%q},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":%q},
		"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"kctl-unprivileged"}]}`, name, name)
	for _, obj := range []struct{ path, body string }{{"roles", role}, {"rolebindings", binding}} {
		path := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/" + obj.path
		if code, resp := testRawRequest(t, admin, "POST", path, obj.body); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, code, resp)
		}
	}
}

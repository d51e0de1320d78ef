// Package extest holds the helpers the examples' tests share: they run an
// example's controller against the local control plane that `make test`
// starts (go run ./hack/controlplane run -- go test ./...), found through
// KCTL_TEST_KUBECONFIG. Without it a test skips, loudly, or fails when
// CI=true: CI must never skip one. It mirrors package kctl's testenv_test.go,
// which the examples cannot import.
//
// There is no controller-manager: namespaces are never finalized and nothing
// is garbage-collected. Each test works in a fresh namespace (Namespace).
package extest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

	"github.com/kctl-dev/kctl"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// skipped counts the tests skipped for want of a control plane.
var skipped atomic.Int32

// Main runs the tests and then says on the terminal how many were skipped
// for want of a control plane. Call it from the test package's TestMain:
//
//	func TestMain(m *testing.M) { extest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if n := skipped.Load(); n > 0 {
		// go test shows a passing package's output only with -v, so say it on the terminal too.
		msg := fmt.Sprintf("\n*** SKIPPING INTEGRATION TESTS: no control plane (run `make test`): %d tests skipped ***\n\n", n)
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			tty.WriteString(msg)
			tty.Close()
		} else {
			os.Stderr.WriteString(msg)
		}
	}
	os.Exit(code)
}

// Kubeconfig returns the control plane's admin kubeconfig path. When
// KCTL_TEST_KUBECONFIG is unset the test is skipped, or fails when CI=true.
func Kubeconfig(t *testing.T) string {
	t.Helper()
	const name = "KCTL_TEST_KUBECONFIG"
	if v := os.Getenv(name); v != "" {
		return v
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("integration tests need the control plane: run `make test` (%s is not set, and with CI=true no test may skip)", name)
	}
	skipped.Add(1)
	t.Skipf("SKIPPING INTEGRATION TEST: no control plane (%s is not set): run `make test`", name)
	return ""
}

// Config returns a new config for the control plane's admin.
func Config(t *testing.T) *rest.Config {
	t.Helper()
	path := Kubeconfig(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading the control plane's kubeconfig %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// Namespace creates a new namespace "ex-<test name>-<random>" and returns
// its name. It is never deleted: nothing would finalize it.
func Namespace(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	suffix := make([]byte, 3)
	rand.Read(suffix)
	base := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	name := "ex-" + strings.Trim(base[:min(len(base), 40)], "-") + "-" + hex.EncodeToString(suffix)
	EnsureNamespace(t, cfg, name)
	return name
}

// EnsureNamespace creates namespace name unless it exists, e.g. the fixed
// namespace an example's manifests use.
func EnsureNamespace(t *testing.T, cfg *rest.Config, name string) {
	t.Helper()
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := kctl.NewClient[corev1.Namespace](conn).Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// Manager returns a Manager with opts for cfg whose cache holds only
// namespace ns (cluster-scoped types are cached whole) and whose logs go to
// t.Log.
func Manager(t *testing.T, cfg *rest.Config, ns string, opts kctl.Options) *kctl.Manager {
	t.Helper()
	opts.Config = cfg
	opts.Logger = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	mgr, err := kctl.NewManager(opts)
	if err != nil {
		t.Fatalf("kctl.NewManager: %v", err)
	}
	return mgr
}

// logWriter sends log lines to t.Log, so they show with a failing test only.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Start runs mgr.Start in the background until the end of the test, and
// then fails the test if Start returned an error or did not return in 60 s.
func Start(t *testing.T, mgr *kctl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Manager.Start returned %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("Manager.Start did not return 60s after its context ended")
			}
		})
	})
}

// Eventually polls cond until it returns "" (met), and fails the test after
// 30 s with what and cond's last answer (what it saw instead).
func Eventually(t *testing.T, what string, cond func() (saw string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		saw := cond()
		if saw == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s; last saw: %s", what, saw)
		}
		<-tick.C
	}
}

// Kubectl runs the control plane's kubectl (<repo>/.cache/bin/kubectl, built
// with it) with args against the control plane, and returns its output. A
// failure fails the test.
func Kubectl(t *testing.T, args ...string) string {
	t.Helper()
	kubeconfig := Kubeconfig(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".cache", "bin", "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no kubectl at %s (the control plane builds it: run `make controlplane`): %v", bin, err)
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// DryRun checks manifests (paths relative to the test's folder) with
// `kubectl apply --dry-run=server`: the API server validates every field
// (strictly) and runs admission without storing anything.
func DryRun(t *testing.T, manifests ...string) {
	t.Helper()
	args := []string{"apply", "--dry-run=server", "--validate=strict"}
	for _, m := range manifests {
		args = append(args, "-f", m)
	}
	t.Logf("kubectl %s:\n%s", strings.Join(args, " "), Kubectl(t, args...))
}

// Apply applies manifests (paths relative to the test's folder) for real.
func Apply(t *testing.T, manifests ...string) {
	t.Helper()
	args := []string{"apply", "--validate=strict"}
	for _, m := range manifests {
		args = append(args, "-f", m)
	}
	t.Logf("kubectl %s:\n%s", strings.Join(args, " "), Kubectl(t, args...))
}

// ServiceAccountConfig returns a config that authenticates as ServiceAccount
// ns/name with a 10-minute token from the TokenRequest API, as the
// example's Pod would: the way to test that its RBAC manifest is enough.
func ServiceAccountConfig(t *testing.T, cfg *rest.Config, ns, name string) *rest.Config {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/api/v1/namespaces/%s/serviceaccounts/%s/token", strings.TrimSuffix(cfg.Host, "/"), ns, name)
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}}`
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	defer resp.Body.Close()
	var tr authenticationv1.TokenRequest
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %s (%v)", ns, name, resp.Status, err)
	}
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	return sa
}

// repoRoot is the first folder upwards from the working directory that holds hack/tools/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "tools", "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", errors.New("extest: no hack/tools/go.mod in " + dir + " or above: run the tests in a kctl checkout")
		}
	}
}

package kctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// writeKubeconfig writes a kubeconfig for the server at host to path and returns path.
func writeKubeconfig(t *testing.T, path, host string) string {
	t.Helper()
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n", host)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig_TriesFlagThenKUBECONFIGThenInClusterThenHome(t *testing.T) {
	dir := t.TempDir()
	flag := writeKubeconfig(t, filepath.Join(dir, "flag"), "https://flag:6443")
	env := writeKubeconfig(t, filepath.Join(dir, "env"), "https://env:6443")
	writeKubeconfig(t, filepath.Join(dir, "home/.kube/config"), "https://home:6443")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("KUBECONFIG", env)
	for _, tc := range []struct{ flag, env, want string }{
		{flag, env, "https://flag:6443"}, {"", env, "https://env:6443"}, {"", "", "https://home:6443"},
	} {
		t.Setenv("KUBECONFIG", tc.env)
		cfg, err := LoadConfig(tc.flag)
		if err != nil || cfg.Host != tc.want {
			t.Errorf("LoadConfig(%q) with KUBECONFIG=%q = %v, %v; want host %s", tc.flag, tc.env, cfg, err, tc.want)
		}
	}
	t.Setenv("HOME", filepath.Join(dir, "nohome"))
	_, err := LoadConfig("")
	if err == nil || !strings.Contains(err.Error(), "$KUBECONFIG (not set)") || !strings.Contains(err.Error(), "in-cluster") || !strings.Contains(err.Error(), "pass --kubeconfig") {
		t.Errorf("LoadConfig with nothing: err = %v, want one listing what was tried and what to do", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("LoadConfig of a missing file: err = %v", err)
	}
}

// In a pod (KUBERNETES_SERVICE_HOST and _PORT set) the in-cluster service
// account comes before ~/.kube/config, and wins even when it is broken: here
// its token file is missing, and the error says so rather than falling back
// to another cluster.
func TestLoadConfig_InClusterVariablesSetWithoutAToken_IsAnErrorNamingTheTokenFile(t *testing.T) {
	const tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	if _, err := os.Stat(tokenFile); err == nil {
		t.Skipf("%s exists: this test runs in a pod", tokenFile)
	}
	dir := t.TempDir()
	flag := writeKubeconfig(t, filepath.Join(dir, "flag"), "https://flag:6443")
	env := writeKubeconfig(t, filepath.Join(dir, "env"), "https://env:6443")
	writeKubeconfig(t, filepath.Join(dir, "home/.kube/config"), "https://home:6443")
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	for _, tc := range []struct{ flag, env, want string }{{flag, env, "https://flag:6443"}, {"", env, "https://env:6443"}} {
		t.Setenv("KUBECONFIG", tc.env)
		cfg, err := LoadConfig(tc.flag)
		if err != nil || cfg.Host != tc.want {
			t.Errorf("LoadConfig(%q) in a pod with KUBECONFIG=%q = %v, %v; want host %s", tc.flag, tc.env, cfg, err, tc.want)
		}
	}
	t.Setenv("KUBECONFIG", "")
	_, err := LoadConfig("")
	if err == nil || !strings.Contains(err.Error(), "in-cluster") || !strings.Contains(err.Error(), tokenFile) {
		t.Errorf("LoadConfig(\"\") in a pod without a token: err = %v; want the in-cluster error naming %s, not ~/.kube/config's cluster", err, tokenFile)
	}
}

// NewConn limits requests to 200 per second with bursts of 500, unless the
// rest.Config sets QPS or Burst; a negative QPS disables the limit.
func TestNewConn_RateLimit_DefaultsUnlessConfiguredAndNegativeQPSDisablesIt(t *testing.T) {
	for _, tc := range []struct {
		cfg   rest.Config
		qps   float32 // 0: no limiter
		burst int     // requests allowed at once; 0: not counted (at 200 QPS tokens come back too fast to count exactly)
	}{
		{rest.Config{}, 200, 0},
		{rest.Config{QPS: 0.001}, 0.001, 500}, // one token per 1000 s: the burst can be counted
		{rest.Config{QPS: 0.001, Burst: 3}, 0.001, 3},
		{rest.Config{QPS: -1}, 0, 0},
		{rest.Config{QPS: -1, Burst: 3}, 0, 0},
	} {
		tc.cfg.Host = "http://127.0.0.1:1"
		conn := clientTestConn(t, &tc.cfg)
		if tc.qps == 0 {
			if conn.limiter != nil {
				t.Errorf("NewConn(QPS %v, Burst %d) has a limiter of %v QPS, want none", tc.cfg.QPS, tc.cfg.Burst, conn.limiter.QPS())
			}
			continue
		}
		if conn.limiter == nil || conn.limiter.QPS() != tc.qps {
			t.Errorf("NewConn(QPS %v, Burst %d) has limiter %v, want %v QPS", tc.cfg.QPS, tc.cfg.Burst, conn.limiter, tc.qps)
			continue
		}
		if tc.burst == 0 {
			continue
		}
		n := 0
		for n <= tc.burst && conn.limiter.TryAccept() {
			n++
		}
		if n != tc.burst {
			t.Errorf("NewConn(QPS %v, Burst %d) allows %d requests at once, want %d", tc.cfg.QPS, tc.cfg.Burst, n, tc.burst)
		}
	}
}

func TestClient_FaultInjection_TooManyRequests_IsRetriedThenGivesUp(t *testing.T) {
	var calls, failures atomic.Int32
	failures.Store(2)
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= failures.Load() {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{"name":"a","namespace":"ns"}}`))
	})
	g := NewClient[gizmo](conn)
	if obj, err := g.Get(t.Context(), "ns", "a"); err != nil || obj.Name != "a" || calls.Load() != 3 {
		t.Errorf("Get after two 429s = %v, %v after %d calls; want the object after 3 calls", obj, err, calls.Load())
	}
	calls.Store(0)
	failures.Store(1000)
	if _, err := g.Get(t.Context(), "ns", "a"); !apierrors.IsTooManyRequests(err) || calls.Load() != maxRetries+1 {
		t.Errorf("Get always answered 429: err = %v after %d calls; want TooManyRequests after %d", err, calls.Load(), maxRetries+1)
	}
}

func TestClient_FaultInjection_TooManyRequests_WaitHonorsTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
		cancel()
	})
	start := time.Now()
	_, err := NewClient[gizmo](conn).Get(ctx, "ns", "a")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Errorf("Get with a canceled context during Retry-After: err = %v after %v", err, time.Since(start))
	}
}

// A 429 with Retry-After: 1 is retried one second later, not at once.
func TestClient_FaultInjection_TooManyRequestsRetryAfterOne_RetriesASecondLater(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		n := len(arrivals)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{"name":"a","namespace":"ns"}}`))
	})
	obj, err := NewClient[gizmo](conn).Get(t.Context(), "ns", "a")
	if err != nil || obj.Name != "a" {
		t.Fatalf("Get after a 429 = %v, %v; want the object", obj, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 2 || arrivals[1].Sub(arrivals[0]) < time.Second {
		t.Errorf("%d requests, %v apart; want the retry at least 1s after the 429 with Retry-After: 1", len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]))
	}
}

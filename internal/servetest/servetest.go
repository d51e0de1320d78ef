// Package servetest is what the tests of kctl/webhook and kctl/debug
// share: a Manager of a namespace of its own on kctltest's control plane
// (each package's TestMain calls kctltest.Main), started in the
// background, and small helpers to poll and to read logs. It is imported
// by tests only.
package servetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/kctltest"
	"k8s.io/client-go/rest"
)

// Config returns a new config for the control plane's admin.
func Config(t *testing.T) *rest.Config {
	t.Helper()
	return kctltest.Start(t).Config()
}

// Namespace creates a namespace of the test's own and returns its name.
func Namespace(t *testing.T) string {
	t.Helper()
	return kctltest.Start(t).Namespace(t)
}

// Manager makes a Manager on cfg whose cache holds only namespace ns,
// logging to the test (kctltest.Logger) unless opts.Logger is set.
func Manager(t *testing.T, cfg *rest.Config, ns string, opts kctl.Options) *kctl.Manager {
	t.Helper()
	opts.Config = cfg
	opts.Cache.DefaultScope.Namespaces = []string{ns}
	if opts.Logger == nil {
		opts.Logger = kctltest.Logger(t)
	}
	m, err := kctl.NewManager(opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

// Start runs m.Start in the background. stop cancels it and returns what
// Start returned; it also runs at the end of the test, failing it if
// Start returned an error.
func Start(t *testing.T, m *kctl.Manager) (stop func() error) {
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

// FreeAddr returns a loopback address held for the test's server until the
// test ends (controlplane.ReservePorts: a port-0 pick could be taken by
// someone else before the server binds it).
func FreeAddr(t *testing.T) string {
	t.Helper()
	held, err := controlplane.ReservePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Release)
	return held.Addr(0)
}

// Eventually polls cond until it holds, failing the test after 30 s.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	kctltest.Eventually(t, what, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	}, kctltest.Timeout(30*time.Second))
}

// RawRequest sends one request with cfg's credentials and JSON body (none
// if ""), and returns the status code and the response body.
func RawRequest(t *testing.T, cfg *rest.Config, method, path, body string) (int, []byte) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + path
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
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

// Get returns the status and body of GET http://addr/path sent with Host
// host ("" for addr).
func Get(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// PollPage polls GET http://addr/path until ok accepts the answer, for up
// to 30 s.
func PollPage(t *testing.T, addr, path, what string, ok func(code int, body string) bool) {
	t.Helper()
	var code int
	var body string
	kctltest.Eventually(t, "GET "+path+" showing "+what, func() string {
		code, body = Get(t, addr, "", path)
		if ok(code, body) {
			return ""
		}
		return fmt.Sprintf("%d %.300s", code, body)
	}, kctltest.Timeout(30*time.Second))
}

// LogBuffer collects log output from many goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the logged lines that contain substr.
func (b *LogBuffer) Lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// LinesEventually waits until at least n logged lines contain substr and
// returns them.
func (b *LogBuffer) LinesEventually(t *testing.T, substr string, n int) []string {
	t.Helper()
	what := fmt.Sprintf("%d log lines containing %q", n, substr)
	Eventually(t, what, func() bool { return len(b.Lines(substr)) >= n })
	return b.Lines(substr)
}

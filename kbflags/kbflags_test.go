package kbflags

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	coordinationv1 "k8s.io/api/coordination/v1"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// parsed is Flags after parsing args.
func parsed(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f := Register(fs, "test")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLogger_FollowsLevelAndFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := parsed(t, "--log-level=debug", "--log-format=json").Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hello")
	if got := buf.String(); !strings.HasPrefix(got, "{") || !strings.Contains(got, `"level":"DEBUG"`) {
		t.Errorf("--log-level=debug --log-format=json wrote %q, want a JSON line at DEBUG", got)
	}
	buf.Reset()
	log, err = parsed(t).Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("dropped")
	log.Info("kept")
	if got := buf.String(); !strings.Contains(got, "level=INFO msg=kept") || strings.Contains(got, "dropped") {
		t.Errorf("the defaults wrote %q, want one text line at INFO", got)
	}
	for _, bad := range [][]string{{"--log-level=loud"}, {"--log-format=xml"}} {
		_, err := parsed(t, bad...).Logger(&buf)
		if err == nil || !strings.HasPrefix(err.Error(), bad[0]+":") {
			t.Errorf("%s: error %v, want one that starts with the flag", bad[0], err)
		}
	}
}

func TestServe_TurnsOnWhatTheFlagsAsk(t *testing.T) {
	env := kctltest.Start(t)
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		name    string
		flags   []string
		scheme  string
		metrics int // the status of GET /metrics without a token
		leader  bool
	}{
		{"plain", nil, "http", http.StatusOK, false},
		{"secure and leader", []string{"--metrics-secure", "--leader-elect"}, "https", http.StatusUnauthorized, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			metrics, health := freeAddr(t), freeAddr(t)
			f := parsed(t, append(tc.flags, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+health)...)
			mgr, err := kctl.NewManager(kctl.Options{Config: env.Config(), Logger: kctltest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Serve(mgr, kctl.LeaderElection{Name: "kbflags", Namespace: ns}); err != nil {
				t.Fatal(err)
			}
			run(t, mgr)
			want := map[string]int{tc.scheme + "://" + metrics + "/metrics": tc.metrics, "http://" + health + "/readyz": http.StatusOK}
			for url, code := range want {
				kctltest.Eventually(t, fmt.Sprintf("GET %s answers %d", url, code), func() string {
					resp, err := insecure.Get(url)
					if err != nil {
						return err.Error()
					}
					resp.Body.Close()
					if resp.StatusCode != code {
						return resp.Status
					}
					return ""
				})
			}
			leases := kctl.NewClient[coordinationv1.Lease](env.Conn)
			kctltest.Eventually(t, fmt.Sprintf("Lease kbflags exists: %t", tc.leader), func() string {
				_, err := leases.Get(t.Context(), ns, "kbflags")
				if exists := err == nil; exists != tc.leader {
					return fmt.Sprintf("exists: %t (%v)", exists, err)
				}
				return ""
			})
		})
	}
}

// freeAddr is a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// run starts mgr until the end of the test, which fails if Start fails.
func run(t *testing.T, mgr *kctl.Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("Start did not return within a minute of the cancel")
		}
	})
}

package debug

// ServeHistory and ServePprof against DNS rebinding (issue 33, item 5): a
// web page whose name an attacker rebinds to 127.0.0.1 sends its own name
// as Host, and must be refused. (internal/serve's tests decide OwnHost for
// addresses no test may listen on.)

import (
	"os"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/servetest"
	"github.com/kctl-dev/kctl/kctltest"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// testManager is a Manager of a namespace of the test's own, not started.
func testManager(t *testing.T) *kctl.Manager {
	t.Helper()
	return servetest.Manager(t, servetest.Config(t), servetest.Namespace(t), kctl.Options{})
}

// TestDebugServers_OtherHost_IsRefused: the debug and pprof servers answer
// a request for their own address or a loopback name (at any port, as
// through kubectl port-forward), and refuse one whose Host is another
// name, as a page rebound by DNS sends, with 421 Misdirected Request.
func TestDebugServers_OtherHost_IsRefused(t *testing.T) {
	mgr := testManager(t)
	debugAddr, pprofAddr := servetest.FreeAddr(t), servetest.FreeAddr(t)
	if err := ServeHistory(mgr, debugAddr); err != nil {
		t.Fatal(err)
	}
	if err := ServePprof(mgr, pprofAddr); err != nil {
		t.Fatal(err)
	}
	servetest.Start(t, mgr)
	servetest.PollPage(t, debugAddr, "/debug/kctl/controllers", "the debug page", func(code int, _ string) bool { return code == 200 })
	for _, s := range []struct{ addr, path, page string }{
		{debugAddr, "/debug/kctl/controllers", "kctl controllers"},
		{pprofAddr, "/debug/pprof/", "goroutine"},
	} {
		_, port, _ := strings.Cut(s.addr, ":")
		for _, tc := range []struct {
			host string
			code int
		}{
			{s.addr, 200},
			{"localhost:" + port, 200},
			{"localhost:9999", 200}, // kubectl port-forward 9999:<port>
			{"LocalHost.", 200},
			{"[::1]:" + port, 200},
			{"evil.example:" + port, 421},
			{"evil.example", 421},
			{"127.0.0.1.evil.example:" + port, 421},
			{"localhost.evil.example:" + port, 421},
		} {
			code, body := servetest.Get(t, s.addr, tc.host, s.path)
			if code != tc.code || (code == 200) != strings.Contains(body, s.page) {
				t.Errorf("GET %s with Host %s = %d %.100q, want %d, with the page only on 200", s.path, tc.host, code, body, tc.code)
			}
		}
	}
}

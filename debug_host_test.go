package kctl

// ServeDebug and ServePprof against DNS rebinding (issue 33, item 5): a
// web page whose name an attacker rebinds to 127.0.0.1 sends its own name
// as Host, and must be refused.

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// getHost returns the status and body of GET http://addr/path sent with
// Host host.
func getHost(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestDebugServers_OtherHost_IsRefused: the debug and pprof servers answer
// a request for their own address or a loopback name (at any port, as
// through kubectl port-forward), and refuse one whose Host is another
// name, as a page rebound by DNS sends, with 421 Misdirected Request.
func TestDebugServers_OtherHost_IsRefused(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	debugAddr, pprofAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	if err := mgr.ServeDebug(debugAddr); err != nil {
		t.Fatal(err)
	}
	if err := mgr.ServePprof(pprofAddr); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	pollPage(t, debugAddr, "/debug/kctl/controllers", "the debug page", func(code int, _ string) bool { return code == 200 })
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
			code, body := getHost(t, s.addr, tc.host, s.path)
			if code != tc.code || (code == 200) != strings.Contains(body, s.page) {
				t.Errorf("GET %s with Host %s = %d %.100q, want %d, with the page only on 200", s.path, tc.host, code, body, tc.code)
			}
		}
	}
}

// TestDebugServers_OwnHost_IsAddressOrLoopbackName: ownHost's decision,
// for addresses no test may listen on.
func TestDebugServers_OwnHost_IsAddressOrLoopbackName(t *testing.T) {
	for _, tc := range []struct {
		bound, local, host string
		own                bool
	}{
		{":6060", "10.0.0.7:6060", "10.0.0.7:6060", true},  // a Pod IP, reached by it
		{":6060", "10.0.0.7:6060", "10.0.0.7", true},       // no port
		{":6060", "10.0.0.7:6060", "10.0.0.8:6060", false}, // not this address
		{"0.0.0.0:6060", "[fd00::7]:6060", "[fd00::7]:6060", true},
		{"debug.internal:6060", "10.0.0.7:6060", "debug.internal:6060", true}, // the name it was given
		{"debug.internal:6060", "10.0.0.7:6060", "DEBUG.internal.:80", true},
		{":6060", "10.0.0.7:6060", "pod.example:6060", false},
		{":6060", "127.0.0.1:6060", "app.localhost:6060", true},
		{":6060", "127.0.0.1:6060", "127.0.0.2:6060", true},
		{":6060", "127.0.0.1:6060", "[::ffff:127.0.0.1]:6060", true},
		{":6060", "127.0.0.1:6060", "", false},
		{":6060", "127.0.0.1:6060", "localhost:6060@evil.example", false},
	} {
		if own := ownHost(tc.bound, tc.local, tc.host); own != tc.own {
			t.Errorf("ownHost(%q, %q, %q) = %v, want %v", tc.bound, tc.local, tc.host, own, tc.own)
		}
	}
}

// TestDebugServers_BeyondLoopback_Warns: a debug or pprof server listening
// on any address but loopback logs a warning at start; on loopback, none.
func TestDebugServers_BeyondLoopback_Warns(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:6060", false},
		{"127.0.0.2:6060", false},
		{"[::1]:6060", false},
		{"0.0.0.0:6060", true},
		{"[::]:6060", true},
		{"10.0.0.7:6060", true},
		{"[fd00::7]:6060", true},
	} {
		logs := &logBuffer{}
		log := slog.New(slog.NewTextHandler(logs, nil))
		spec := serverSpec{name: "pprof", private: true}
		spec.warnBeyondLoopback(log, tc.addr)
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), tc.addr)
		if warned != tc.warn {
			t.Errorf("a pprof server listening on %s: warned %v, want %v; logged %q", tc.addr, warned, tc.warn, logs.String())
		}
	}
}

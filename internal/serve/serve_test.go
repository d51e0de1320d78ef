package serve

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestPrivateServers_OwnHost_IsAddressOrLoopbackName: OwnHost's decision,
// for addresses no test may listen on (kctl/debug's tests listen).
func TestPrivateServers_OwnHost_IsAddressOrLoopbackName(t *testing.T) {
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
		if own := OwnHost(tc.bound, tc.local, tc.host); own != tc.own {
			t.Errorf("OwnHost(%q, %q, %q) = %v, want %v", tc.bound, tc.local, tc.host, own, tc.own)
		}
	}
}

// TestPrivateServers_BeyondLoopback_Warns: a private server (kctl/debug's)
// listening on any address but loopback logs a warning at start; on
// loopback, none.
func TestPrivateServers_BeyondLoopback_Warns(t *testing.T) {
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
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		spec := Spec{Name: "pprof", Private: true}
		spec.WarnBeyondLoopback(log, tc.addr)
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), tc.addr)
		if warned != tc.warn {
			t.Errorf("a pprof server listening on %s: warned %v, want %v; logged %q", tc.addr, warned, tc.warn, logs.String())
		}
	}
}

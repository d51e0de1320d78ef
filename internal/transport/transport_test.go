package transport

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// New limits requests to 200 per second with bursts of 500, unless the
// rest.Config sets QPS or Burst; a negative QPS disables the limit.
func TestNew_RateLimit_DefaultsUnlessConfiguredAndNegativeQPSDisablesIt(t *testing.T) {
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
		conn, err := New(&tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if tc.qps == 0 {
			if conn.limiter != nil {
				t.Errorf("New(QPS %v, Burst %d) has a limiter of %v QPS, want none", tc.cfg.QPS, tc.cfg.Burst, conn.limiter.QPS())
			}
			continue
		}
		if conn.limiter == nil || conn.limiter.QPS() != tc.qps {
			t.Errorf("New(QPS %v, Burst %d) has limiter %v, want %v QPS", tc.cfg.QPS, tc.cfg.Burst, conn.limiter, tc.qps)
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
			t.Errorf("New(QPS %v, Burst %d) allows %d requests at once, want %d", tc.cfg.QPS, tc.cfg.Burst, n, tc.burst)
		}
	}
}

// Without a Timeout in the config, a Client bounds each request (but a
// watch) by 70 s; each watch carries its own deadline.
func TestNew_NoTimeout_BoundsRequestsByTheDefault(t *testing.T) {
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.http.Timeout != 70*time.Second || c.watches.Timeout != 0 {
		t.Errorf("timeouts: requests %v, watches %v; want 70s and none (each watch has its deadline)", c.http.Timeout, c.watches.Timeout)
	}
}

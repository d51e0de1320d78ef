package transport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// observed records what Do tells its Observer.
type observed struct {
	mu       sync.Mutex
	answered []int // status codes; 0: no answer
	took     int
	timed    int
}

func (o *observed) Answered(method, host string, resp *http.Response) {
	o.mu.Lock()
	defer o.mu.Unlock()
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	o.answered = append(o.answered, code)
}

func (o *observed) Took(method, host string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.took++
}

func (o *observed) TimeBody(body io.ReadCloser, method, host string, start time.Time) io.ReadCloser {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.timed++
	return body
}

// Fault injection: a server answering 429 twice (a real API server
// answers 429 only under load). Do retries after Retry-After, counts
// each attempt, times the request once, and sends the same body each time.
func TestDo_FaultInjection_TooManyRequests_RetriedCountedTimedOnce(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) != "payload" || r.Header.Get("Accept") != "application/json" {
			t.Errorf("attempt %d: body %q, Accept %q", calls.Load()+1, body, r.Header.Get("Accept"))
		}
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	r := Request{Method: "PUT", Path: "/api/v1/x", Body: []byte("payload"), Accept: "application/json"}
	resp, err := c.Do(t.Context(), r, obs)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []int{429, 429, 200}
	if resp.StatusCode != 200 || !slices.Equal(obs.answered, want) || obs.timed != 1 || obs.took != 0 {
		t.Errorf("Do = %d; observed answers %v, timed %d, took %d; want 200, %v, 1, 0", resp.StatusCode, obs.answered, obs.timed, obs.took, want)
	}
}

// A request with no answer is counted as such and timed by Took; the
// error names the call.
func TestDo_NoAnswer_CountedAndTook(t *testing.T) {
	c, err := New(&rest.Config{Host: "http://127.0.0.1:1", QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	_, err = c.Do(t.Context(), Request{Method: "GET", Path: "/api/v1/pods"}, obs)
	if err == nil || !strings.HasPrefix(err.Error(), "kctl: GET /api/v1/pods: ") {
		t.Errorf("Do to a closed port = %v, want an error naming GET /api/v1/pods", err)
	}
	if !slices.Equal(obs.answered, []int{0}) || obs.took != 1 || obs.timed != 0 {
		t.Errorf("observed answers %v, took %d, timed %d; want [0], 1, 0", obs.answered, obs.took, obs.timed)
	}
}

package kctl

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kctl-dev/kctl/internal/metrics"

	"k8s.io/client-go/rest"
)

// countedConn returns a Conn to host whose requests are counted in the
// returned metrics, as a Manager's Conn is.
func countedConn(t *testing.T, host string) (*Conn, *metrics.Registry) {
	t.Helper()
	conn, err := NewConn(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	conn.requests = m.Requests
	return conn, m
}

// requestSeries returns the rest_client_* lines of m's page.
func requestSeries(t *testing.T, m *metrics.Registry) map[string]string {
	t.Helper()
	return samples(onlyFamilies(scrapeMetrics(t, m.Handler()), "rest_client_"))
}

// TestConn_Retried429_CountsEachAttempt_TimesTheRequestUntilClose uses a
// fault-injecting server (httptest) that answers the first attempt 429.
func TestConn_Retried429_CountsEachAttempt_TimesTheRequestUntilClose(t *testing.T) {
	var calls atomic.Int32
	faulty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "{}")
	}))
	defer faulty.Close()
	conn, m := countedConn(t, faulty.URL)
	host := strings.TrimPrefix(faulty.URL, "http://")

	resp, err := conn.do(t.Context(), request{method: http.MethodGet, path: "/api/v1/configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	page := requestSeries(t, m)
	for series, want := range map[string]string{
		`rest_client_requests_total{code="429",host="` + host + `",method="GET"}`: "1",
		`rest_client_requests_total{code="200",host="` + host + `",method="GET"}`: "1",
	} {
		if page[series] != want {
			t.Errorf("%s = %q, want %s; page: %v", series, page[series], want, page)
		}
	}
	duration := `rest_client_request_duration_seconds_count{host="` + host + `",verb="GET"}`
	if _, ok := page[duration]; ok {
		t.Errorf("%s is on the page before the answer's body is closed", duration)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp.Body.Close() // a second Close times nothing more
	page = requestSeries(t, m)
	if page[duration] != "1" {
		t.Errorf("%s = %q after Close, want 1 (the retried request once)", duration, page[duration])
	}
	if le := `rest_client_request_duration_seconds_bucket{host="` + host + `",verb="GET",le="60"}`; page[le] != "1" {
		t.Errorf("%s = %q, want 1: client-go's buckets end at 60", le, page[le])
	}
}

func TestConn_NoAnswer_CountsErrorCodeAndTimes(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler()) // closed at once: a refused connection
	closed.Close()
	conn, m := countedConn(t, closed.URL)
	host := strings.TrimPrefix(closed.URL, "http://")
	if _, err := conn.do(t.Context(), request{method: http.MethodPost, path: "/api/v1/namespaces/ns/configmaps", body: []byte("{}")}); err == nil {
		t.Fatal("do to a closed server = nil error")
	}
	page := requestSeries(t, m)
	for series, want := range map[string]string{
		`rest_client_requests_total{code="<error>",host="` + host + `",method="POST"}`: "1",
		`rest_client_request_duration_seconds_count{host="` + host + `",verb="POST"}`:  "1",
	} {
		if page[series] != want {
			t.Errorf("%s = %q, want %s; page: %v", series, page[series], want, page)
		}
	}
}

// TestConn_Watch_CountedNotTimed uses a fault-injecting server (httptest)
// whose watches end at once.
func TestConn_Watch_CountedNotTimed(t *testing.T) {
	watch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})) // an empty 200
	defer watch.Close()
	conn, m := countedConn(t, watch.URL)
	host := strings.TrimPrefix(watch.URL, "http://")
	resp, err := conn.do(t.Context(), request{method: http.MethodGet, path: "/api/v1/pods", query: url.Values{"watch": {"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := requestSeries(t, m)
	if got := page[`rest_client_requests_total{code="200",host="`+host+`",method="GET"}`]; got != "1" {
		t.Errorf("watch requests counted %q, want 1; page: %v", got, page)
	}
	for series := range page {
		if strings.HasPrefix(series, "rest_client_request_duration_seconds") {
			t.Errorf("a watch was timed: %s", series)
		}
	}
}

package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRequestMetrics_Nil_CountsNothing(t *testing.T) {
	var r *Requests // a Conn made by NewConn
	r.Answered(http.MethodGet, "h", nil)
	r.Took(http.MethodGet, "h", time.Second)
	body := io.NopCloser(strings.NewReader(""))
	if got := r.TimeBody(body, http.MethodGet, "h", time.Now()); got != body {
		t.Errorf("nil requestMetrics wrapped the body for timing: %T", got)
	}
}

// BenchmarkRequestMetrics_PerRequest is what counting and timing add to one
// request (without retries).
func BenchmarkRequestMetrics_PerRequest(b *testing.B) {
	r := newRequests()
	resp := &http.Response{StatusCode: http.StatusOK}
	start := time.Now()
	for b.Loop() {
		r.Answered(http.MethodGet, "127.0.0.1:6443", resp)
		r.TimeBody(http.NoBody, http.MethodGet, "127.0.0.1:6443", start).Close()
	}
}

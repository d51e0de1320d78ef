package metrics

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/prom"
)

// This file counts and times kctl's requests to the API server under the
// names, labels, help texts and buckets of client-go's REST client
// metrics (k8s.io/component-base/metrics/prometheus/restclient, also
// registered by controller-runtime), so that client-go dashboards work
// unchanged:
//
//	rest_client_requests_total{code,host,method}
//	  counter, one per attempt
//	rest_client_request_duration_seconds{host,verb}
//	  histogram, 0.005s .. 60s
//
// As in client-go: code is the HTTP status code, or "<error>" when no
// answer came; method and verb are the HTTP method (GET, POST...); host is
// the API server's host:port. A retried request (429) counts once per
// attempt and is timed once, from before the client-side rate limit to the
// end of reading the answer (the body's Close). Watches are counted, not
// timed.

// requestBuckets are client-go's buckets for
// rest_client_request_duration_seconds.
var requestBuckets = []float64{
	0.005, 0.025, 0.1, 0.25,
	0.5, 1, 2, 4,
	8, 15, 30, 60,
}

// Requests are one Manager's rest_client_* series. A nil
// *Requests counts nothing (a Conn made by NewConn). It is safe for
// concurrent use.
type Requests struct {
	mu sync.Mutex
	// results count the attempts by code, method and host.
	results map[[3]string]*atomic.Uint64
	// duration times the requests by verb and host.
	duration map[[2]string]*prom.Histogram
}

func newRequests() *Requests {
	return &Requests{
		results:  map[[3]string]*atomic.Uint64{},
		duration: map[[2]string]*prom.Histogram{},
	}
}

// Answered counts one attempt to send a request: its answer's status
// code, or "<error>" when none came (resp is nil).
func (r *Requests) Answered(method, host string, resp *http.Response) {
	if r == nil {
		return
	}
	code := "<error>"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	key := [3]string{code, method, host}
	r.mu.Lock()
	n := r.results[key]
	if n == nil {
		n = new(atomic.Uint64)
		r.results[key] = n
	}
	r.mu.Unlock()
	n.Add(1)
}

// Took records how long one request took, its retries included.
func (r *Requests) Took(verb, host string, d time.Duration) {
	if r == nil {
		return
	}
	key := [2]string{verb, host}
	r.mu.Lock()
	h := r.duration[key]
	if h == nil {
		h = prom.NewHistogram(requestBuckets)
		r.duration[key] = h
	}
	r.mu.Unlock()
	h.Observe(d.Seconds())
}

// TimeBody returns body, which records how long the request took since
// start when it is first closed.
func (r *Requests) TimeBody(body io.ReadCloser, verb, host string, start time.Time) io.ReadCloser {
	if r == nil {
		return body
	}
	done := func() {
		r.Took(verb, host, time.Since(start))
	}
	return &timedBody{ReadCloser: body, done: done}
}

// timedBody is an answer's body that calls done once, at its first Close.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// collect adds the rest_client_* series to p.
func (r *Requests) collect(p *prom.Page) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range r.results {
		p.Counter("rest_client_requests_total",
			"Number of HTTP requests, partitioned by "+
				"status code, method, and host.",
			float64(n.Load()),
			"code", k[0], "host", k[2], "method", k[1])
	}
	for k, h := range r.duration {
		p.Histogram("rest_client_request_duration_seconds",
			"Request latency in seconds. Broken down by "+
				"verb, and host.",
			h, "host", k[1], "verb", k[0])
	}
}

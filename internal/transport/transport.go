// Package transport sends requests to one API server, as kctl.Conn
// documents: client-go's HTTP client (TLS, authentication, exec plugins)
// with kctl's user agent, a client-side rate limit, a bound on every
// request so that a silent network fails it, retries of 429 Too Many
// Requests (and of a read's 5xx with Retry-After), and the server's
// Warning headers logged once per text (internal/warnings). It also reads
// a watch's frames and decodes its events (Events, NextEvent, Stream: ERROR
// Status, the types a watch sends, the watch's own errors), and the
// metadata of an object that does not decode (ObjectMeta). It knows
// nothing of kctl's types: a Request is a method, a path and a body, and
// an event's object is decoded by a function the caller passes.
package transport

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/kctl-dev/kctl/internal/warnings"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The default client-side limits are high on purpose: the API server
// protects itself with API Priority and Fairness, answering 429s.
const (
	defaultQPS   = 200
	defaultBurst = 500
)

const (
	// MaxRetries bounds the retries of one request answered 429 (or,
	// for reads, 5xx with Retry-After).
	MaxRetries = 10
	// maxRetryWait caps one Retry-After.
	maxRetryWait = 30 * time.Second
	// defaultTimeout bounds a request but a watch when the
	// rest.Config's Timeout is 0: past the API server's own limit
	// (--request-timeout, 60 s), so that its answer comes first.
	defaultTimeout = 70 * time.Second
)

// Client sends requests to one API server. Make one with New; it is safe
// for concurrent use and holds no goroutines.
type Client struct {
	// Base is scheme://host[/path prefix].
	Base url.URL
	// http bounds each request by the config's Timeout.
	http *http.Client
	// watches is the same transport as http without its timeout:
	// each watch carries its own deadline.
	watches *http.Client
	// limiter is nil when there is no client-side limit.
	limiter flowcontrol.RateLimiter
	// warnings logs the server's Warning headers, once per text.
	warnings *warnings.Log
}

// Observer counts a Client's requests: a kctl Manager's metrics
// (rest_client_requests_total, rest_client_request_duration_seconds).
type Observer interface {
	// Answered counts one attempt; resp is nil if it failed.
	Answered(method, host string, resp *http.Response)
	// Took times a request that failed.
	Took(method, host string, d time.Duration)
	// TimeBody times a request until its answer's body is closed.
	TimeBody(
		body io.ReadCloser,
		method, host string,
		start time.Time,
	) io.ReadCloser
}

// New makes a Client from cfg (which it does not modify): the user agent
// "kctl/<version> (<os>/<arch>)" unless cfg sets one, requests but
// watches bounded by cfg.Timeout (70 s when not above 0), a rate limit
// of cfg.QPS and cfg.Burst (200 and 500 when 0; a negative QPS disables
// it). Warnings go to slog.Default() until LogWarningsTo.
func New(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = cmp.Or(cfg.UserAgent, userAgent())
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf(
			"kctl: making an HTTP client for %s: %w",
			cfg.Host, err)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf(
			"kctl: bad API server address %q: %w",
			cfg.Host, err)
	}
	w := *hc
	w.Timeout = 0
	c := &Client{
		Base:     *base,
		http:     hc,
		watches:  &w,
		warnings: warnings.New(slog.Default()),
	}
	qps := cmp.Or(cfg.QPS, defaultQPS)
	if qps > 0 {
		burst := cmp.Or(max(cfg.Burst, 0), defaultBurst)
		c.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	return c, nil
}

// LogWarningsTo makes c log the server's warnings to log. Call it before
// the first request.
func (c *Client) LogWarningsTo(log *slog.Logger) {
	c.warnings = warnings.New(log)
}

func userAgent() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append(bi.Deps, &bi.Main) {
			isKctl := m.Path == "github.com/kctl-dev/kctl"
			released := m.Version != "" && m.Version != "(devel)"
			if isKctl && released {
				v = m.Version
			}
		}
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	return "kctl/" + v + " (" + platform + ")"
}

// Request is one HTTP request: a watch if its query has "watch".
type Request struct {
	Method string
	// Path is under the Client's Base, e.g. "/api/v1/pods".
	Path        string
	Query       url.Values
	Body        []byte
	ContentType string
	Accept      string
}

// Do sends r, waiting for the rate limiter and retrying 429s (and, for
// reads, 5xx with Retry-After). The caller closes the response body. Each
// attempt is counted in obs (nil: not counted), and the request, but for
// a watch, is timed from now until its answer's body is closed.
func (c *Client) Do(
	ctx context.Context,
	r Request,
	obs Observer,
) (*http.Response, error) {
	start := time.Now()
	resp, err := c.retrying(ctx, r, obs)
	host := c.Base.Host
	switch {
	case obs == nil:
		// not counted
	case r.Query.Has("watch"):
		// open as long as it lasts: counted, not timed, as in client-go
	case err != nil:
		took := time.Since(start)
		obs.Took(r.Method, host, took)
	default:
		resp.Body = obs.TimeBody(resp.Body, r.Method, host, start)
	}
	return resp, err
}

// retrying is Do without the timing.
func (c *Client) retrying(
	ctx context.Context,
	r Request,
	obs Observer,
) (*http.Response, error) {
	// call names r in errors, e.g. "GET /api/v1/pods".
	call := r.Method + " " + r.Path
	u := c.Base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.Path
	u.RawQuery = r.Query.Encode()
	hc := c.http
	if r.Query.Has("watch") {
		hc = c.watches
	}
	for attempt := 0; ; attempt++ {
		if c.limiter != nil {
			err := c.limiter.Wait(ctx)
			if err != nil {
				return nil, fmt.Errorf("kctl: %s: waiting for "+
					"the client-side rate limit: %w", call, err)
			}
		}
		var body io.Reader
		if r.Body != nil {
			body = bytes.NewReader(r.Body)
		}
		req, err := http.NewRequestWithContext(
			ctx, r.Method, u.String(), body)
		if err != nil {
			return nil, fmt.Errorf("kctl: %s: %w", call, err)
		}
		req.Header.Set("Accept", r.Accept)
		if r.ContentType != "" {
			req.Header.Set("Content-Type", r.ContentType)
		}
		resp, err := hc.Do(req)
		if obs != nil {
			// resp is nil if and only if err is not
			obs.Answered(r.Method, c.Base.Host, resp)
		}
		if err != nil {
			return nil, fmt.Errorf("kctl: %s: %w", call, err)
		}
		c.warnings.Header(resp.Header, call)
		ra := resp.Header.Get("Retry-After")
		tooMany := resp.StatusCode == http.StatusTooManyRequests
		failed := resp.StatusCode >= 500 && ra != ""
		isRead := r.Method == http.MethodGet
		retry := tooMany || failed && isRead
		if !retry || attempt == MaxRetries {
			return resp, nil
		}
		unread := io.LimitReader(resp.Body, 1<<20)
		_, _ = io.Copy(io.Discard, unread)
		resp.Body.Close()
		wait := time.Second
		s, err := strconv.Atoi(ra)
		if err == nil && s >= 0 {
			asked := time.Duration(s) * time.Second
			wait = min(asked, maxRetryWait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kctl: %s: the server asked "+
				"to retry after %v: %w", call, wait, ctx.Err())
		case <-time.After(wait):
		}
	}
}

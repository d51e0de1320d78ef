package kctl

// Conn, one connection to an API server: finding its configuration
// (LoadConfig), making it (NewConn), and sending a request on it (do), rate
// limited and retried after 429s.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/homedir"
)

// LoadConfig finds the cluster configuration, trying in order: the path given
// (a --kubeconfig flag; "" skips it), $KUBECONFIG (files, merged), the
// in-cluster service account, ~/.kube/config. The first source present wins,
// even if broken; when none is, the error lists what was tried.
//
//	cfg, err := kctl.LoadConfig(*kubeconfig)
func LoadConfig(kubeconfig string) (*rest.Config, error) {
	load := func(what string, rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kctl: loading %s: %w", what, err)
		}
		return cfg, nil
	}
	if kubeconfig != "" {
		return load("the kubeconfig "+kubeconfig, &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig})
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return load("$KUBECONFIG ("+env+")", &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)})
	}
	if cfg, err := rest.InClusterConfig(); !errors.Is(err, rest.ErrNotInCluster) {
		if err != nil {
			return nil, fmt.Errorf("kctl: loading the in-cluster configuration: %w", err)
		}
		return cfg, nil
	}
	home := filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	if _, err := os.Stat(home); err == nil {
		return load(home, &clientcmd.ClientConfigLoadingRules{ExplicitPath: home})
	}
	return nil, fmt.Errorf("kctl: no cluster configuration found; tried the --kubeconfig flag (not given), "+
		"$KUBECONFIG (not set), the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT not set) and %s "+
		"(does not exist): pass --kubeconfig or set $KUBECONFIG", home)
}

// The default client-side limits are high on purpose: the API server
// protects itself with API Priority and Fairness, answering 429s.
const defaultQPS, defaultBurst = 200, 500

const (
	// maxRetries bounds the retries of one request answered 429 (or,
	// for reads, 5xx with Retry-After).
	maxRetries = 10
	// maxRetryWait caps one Retry-After.
	maxRetryWait = 30 * time.Second
	// maxPooledBody: a larger answer's buffer is left to the collector.
	maxPooledBody = 32 << 20
)

// Conn is one connection to an API server, shared by the Clients made from
// it: client-go's HTTP client (TLS, authentication, exec plugins), the user
// agent "kctl/<version> (<os>/<arch>)" unless cfg sets one, and a rate limit
// of cfg.QPS and cfg.Burst (200 and 500 when 0; a negative QPS disables it).
// A 429 Too Many Requests is retried after its Retry-After, at most 10 times.
// A Manager's own Conn counts its requests on the Manager's metrics page
// (rest_client_requests_total, rest_client_request_duration_seconds); one
// you make counts nothing. Make one with NewConn; the zero value is
// unusable. A Conn is safe for concurrent use and holds no goroutines.
type Conn struct {
	base          url.URL                 // scheme://host[/path prefix]
	http, watches *http.Client            // watches: the same transport without cfg.Timeout
	limiter       flowcontrol.RateLimiter // nil: no client-side limit
	discovery     discovery.Cache         // what the server serves, for declared types' checks
	requests      requestObserver         // a Manager's rest_client_* series; nil: not counted
}

// requestObserver counts a Conn's requests: a Manager's metrics
// (rest_client_requests_total, rest_client_request_duration_seconds).
type requestObserver interface {
	// Answered counts one attempt; resp is nil if it failed.
	Answered(method, host string, resp *http.Response)
	// Took times a request that failed.
	Took(method, host string, d time.Duration)
	// TimeBody times a request until its answer's body is closed.
	TimeBody(body io.ReadCloser, method, host string, start time.Time) io.ReadCloser
}

// NewConn makes a Conn from cfg (which it does not modify).
func NewConn(cfg *rest.Config) (*Conn, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = cmp.Or(cfg.UserAgent, userAgent())
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kctl: making an HTTP client for %s: %w", cfg.Host, err)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kctl: bad API server address %q: %w", cfg.Host, err)
	}
	w := *hc
	w.Timeout = 0
	c := &Conn{base: *base, http: hc, watches: &w}
	if qps := cmp.Or(cfg.QPS, defaultQPS); qps > 0 {
		c.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, cmp.Or(max(cfg.Burst, 0), defaultBurst))
	}
	return c, nil
}

func userAgent() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append(bi.Deps, &bi.Main) {
			if m.Path == "github.com/kctl-dev/kctl" && m.Version != "" && m.Version != "(devel)" {
				v = m.Version
			}
		}
	}
	return "kctl/" + v + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// request is one call on a Client's resource; verb names it in errors
// ("update status of"). A list call has no name; a create has none in its path.
type request struct {
	verb, method, namespace, name, sub string
	list                               bool
	query                              url.Values
	body                               []byte
	contentType, path, accept          string // path and accept: set by send
}

// do sends r, waiting for the rate limiter and retrying 429s (and, for
// reads, 5xx with Retry-After). The caller closes the response body. Each
// attempt is counted in c.requests, and the request, but for a watch, is
// timed from now until its answer's body is closed.
func (c *Conn) do(ctx context.Context, r request) (*http.Response, error) {
	start := time.Now()
	resp, err := c.retrying(ctx, r)
	switch {
	case c.requests == nil: // not counted
	case r.query.Has("watch"): // open as long as it lasts: counted, not timed, as in client-go
	case err != nil:
		c.requests.Took(r.method, c.base.Host, time.Since(start))
	default:
		resp.Body = c.requests.TimeBody(resp.Body, r.method, c.base.Host, start)
	}
	return resp, err
}

// retrying is do without the timing.
func (c *Conn) retrying(ctx context.Context, r request) (*http.Response, error) {
	u := c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.path
	u.RawQuery = r.query.Encode()
	hc := c.http
	if r.query.Has("watch") {
		hc = c.watches
	}
	for attempt := 0; ; attempt++ {
		if c.limiter != nil {
			if err := c.limiter.Wait(ctx); err != nil {
				return nil, fmt.Errorf("kctl: %s %s: waiting for the client-side rate limit: %w", r.method, r.path, err)
			}
		}
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
		if err != nil {
			return nil, fmt.Errorf("kctl: %s %s: %w", r.method, r.path, err)
		}
		req.Header.Set("Accept", r.accept)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		resp, err := hc.Do(req)
		if c.requests != nil {
			c.requests.Answered(r.method, c.base.Host, resp) // resp is nil if and only if err is not
		}
		if err != nil {
			return nil, fmt.Errorf("kctl: %s %s: %w", r.method, r.path, err)
		}
		ra := resp.Header.Get("Retry-After")
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 && ra != "" && r.method == http.MethodGet
		if !retry || attempt == maxRetries {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		wait := time.Second
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			wait = min(time.Duration(s)*time.Second, maxRetryWait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kctl: %s %s: the server asked to retry after %v: %w", r.method, r.path, wait, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// bodies recycles the buffers answers are read into. No decoded object
// aliases one: generated protobuf code and encoding/json copy what they keep.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

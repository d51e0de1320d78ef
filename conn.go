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
	if kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{
			ExplicitPath: kubeconfig,
		}
		return loadKubeconfig("the kubeconfig "+kubeconfig, rules)
	}
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env != "" {
		rules := &clientcmd.ClientConfigLoadingRules{
			Precedence: filepath.SplitList(env),
		}
		return loadKubeconfig("$KUBECONFIG ("+env+")", rules)
	}
	cfg, err := rest.InClusterConfig()
	if !errors.Is(err, rest.ErrNotInCluster) {
		if err != nil {
			return nil, fmt.Errorf(
				"kctl: loading the in-cluster configuration: %w", err)
		}
		return cfg, nil
	}
	home := filepath.Join(
		homedir.HomeDir(),
		clientcmd.RecommendedHomeDir,
		clientcmd.RecommendedFileName,
	)
	if _, err := os.Stat(home); err == nil {
		rules := &clientcmd.ClientConfigLoadingRules{
			ExplicitPath: home,
		}
		return loadKubeconfig(home, rules)
	}
	return nil, fmt.Errorf("kctl: no cluster configuration found; "+
		"tried the --kubeconfig flag (not given), "+
		"$KUBECONFIG (not set), "+
		"the in-cluster service account "+
		"(KUBERNETES_SERVICE_HOST/PORT not set) "+
		"and %s (does not exist): "+
		"pass --kubeconfig or set $KUBECONFIG", home)
}

// loadKubeconfig loads the kubeconfig files that rules name; what names
// them in the error.
func loadKubeconfig(
	what string,
	rules *clientcmd.ClientConfigLoadingRules,
) (*rest.Config, error) {
	overrides := &clientcmd.ConfigOverrides{}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		rules,
		overrides,
	)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kctl: loading %s: %w", what, err)
	}
	return cfg, nil
}

// The default client-side limits are high on purpose: the API server
// protects itself with API Priority and Fairness, answering 429s.
const (
	defaultQPS   = 200
	defaultBurst = 500
)

const (
	// maxRetries bounds the retries of one request answered 429 (or,
	// for reads, 5xx with Retry-After).
	maxRetries = 10
	// maxRetryWait caps one Retry-After.
	maxRetryWait = 30 * time.Second
	// maxPooledBody: a larger answer's buffer is left to the collector.
	maxPooledBody = 32 << 20
	// defaultTimeout bounds a request but a watch when the
	// rest.Config's Timeout is 0: past the API server's own limit
	// (--request-timeout, 60 s), so that its answer comes first.
	defaultTimeout = 70 * time.Second
)

// Conn is one connection to an API server, shared by the Clients made from
// it: client-go's HTTP client (TLS, authentication, exec plugins), the user
// agent "kctl/<version> (<os>/<arch>)" unless cfg sets one, and a rate limit
// of cfg.QPS and cfg.Burst (200 and 500 when 0; a negative QPS disables it).
// Every request is bounded on the client, so that a silent network (a
// dead connection behind a proxy, where HTTP/2's health check does not
// reach) fails it instead of holding it forever: a watch a little past the
// timeoutSeconds it asks for (see Client.watch), any other request, its
// answer's body included, by cfg.Timeout (70 s when not above 0). A 429
// Too Many Requests is retried after its Retry-After, at most 10 times.
// A Manager's own Conn counts its requests on the Manager's metrics page
// (rest_client_requests_total, rest_client_request_duration_seconds); one
// you make counts nothing. Make one with NewConn; the zero value is
// unusable. A Conn is safe for concurrent use and holds no goroutines.
type Conn struct {
	// base is scheme://host[/path prefix].
	base url.URL
	http *http.Client
	// watches is the same transport as http without its timeout:
	// each watch carries its own deadline.
	watches *http.Client
	// limiter is nil when there is no client-side limit.
	limiter flowcontrol.RateLimiter
	// discovery is what the server serves, for declared types' checks.
	discovery discovery.Cache
	// requests is a Manager's rest_client_* series; nil: not counted.
	requests requestObserver
}

// requestObserver counts a Conn's requests: a Manager's metrics
// (rest_client_requests_total, rest_client_request_duration_seconds).
type requestObserver interface {
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

// NewConn makes a Conn from cfg (which it does not modify).
func NewConn(cfg *rest.Config) (*Conn, error) {
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
	c := &Conn{
		base:    *base,
		http:    hc,
		watches: &w,
	}
	qps := cmp.Or(cfg.QPS, defaultQPS)
	if qps > 0 {
		burst := cmp.Or(max(cfg.Burst, 0), defaultBurst)
		c.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	return c, nil
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

// request is one call on a Client's resource; verb names it in errors
// ("update status of"). A list call has no name; a create has none in its path.
type request struct {
	verb        string
	method      string
	namespace   string
	name        string
	sub         string
	list        bool
	query       url.Values
	body        []byte
	contentType string
	// path and accept are set by send.
	path   string
	accept string
}

// do sends r, waiting for the rate limiter and retrying 429s (and, for
// reads, 5xx with Retry-After). The caller closes the response body. Each
// attempt is counted in c.requests, and the request, but for a watch, is
// timed from now until its answer's body is closed.
func (c *Conn) do(ctx context.Context, r request) (*http.Response, error) {
	start := time.Now()
	resp, err := c.retrying(ctx, r)
	host := c.base.Host
	switch {
	case c.requests == nil:
		// not counted
	case r.query.Has("watch"):
		// open as long as it lasts: counted, not timed, as in client-go
	case err != nil:
		took := time.Since(start)
		c.requests.Took(r.method, host, took)
	default:
		resp.Body = c.requests.TimeBody(
			resp.Body, r.method, host, start)
	}
	return resp, err
}

// retrying is do without the timing.
func (c *Conn) retrying(
	ctx context.Context,
	r request,
) (*http.Response, error) {
	// call names r in errors, e.g. "GET /api/v1/pods".
	call := r.method + " " + r.path
	u := c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.path
	u.RawQuery = r.query.Encode()
	hc := c.http
	if r.query.Has("watch") {
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
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(
			ctx, r.method, u.String(), body)
		if err != nil {
			return nil, fmt.Errorf("kctl: %s: %w", call, err)
		}
		req.Header.Set("Accept", r.accept)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		resp, err := hc.Do(req)
		if c.requests != nil {
			// resp is nil if and only if err is not
			c.requests.Answered(r.method, c.base.Host, resp)
		}
		if err != nil {
			return nil, fmt.Errorf("kctl: %s: %w", call, err)
		}
		ra := resp.Header.Get("Retry-After")
		tooMany := resp.StatusCode == http.StatusTooManyRequests
		failed := resp.StatusCode >= 500 && ra != ""
		isRead := r.method == http.MethodGet
		retry := tooMany || failed && isRead
		if !retry || attempt == maxRetries {
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

// bodies recycles the buffers answers are read into. No decoded object
// aliases one: generated protobuf code and encoding/json copy what they keep.
var bodies = sync.Pool{
	New: func() any { return new(bytes.Buffer) },
}

// putBody gives buf back to bodies, unless it is too large to keep.
func putBody(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBody {
		bodies.Put(buf)
	}
}

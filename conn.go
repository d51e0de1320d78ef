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
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/discovery"
	"github.com/kctl-dev/kctl/internal/warnings"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/homedir"
)

// LoadConfig finds the cluster configuration, trying in order: the path given
// (a --kubeconfig flag; "" skips it), $KUBECONFIG (files, merged), the
// in-cluster service account, ~/.kube/config. The first source present wins,
// even if broken; when none is, the error lists what was tried. A
// $KUBECONFIG whose files are all missing is an error naming them; one
// missing among others is skipped with a warning. A kubeconfig cluster
// that sets insecure-skip-tls-verify is warned about, naming it. Warnings
// go to slog.Default() (a Manager's, to Options.Logger).
//
//	cfg, err := kctl.LoadConfig(*kubeconfig)
func LoadConfig(kubeconfig string) (*rest.Config, error) {
	return loadConfig(kubeconfig, "", slog.Default())
}

// loadConfig is LoadConfig with a kubeconfig context to use ("": the
// current one) and a logger for its warnings.
func loadConfig(
	kubeconfig string,
	kubeContext string,
	log *slog.Logger,
) (*rest.Config, error) {
	k := kubeconfigLoad{context: kubeContext, log: log}
	if kubeconfig != "" {
		_, err := os.Stat(kubeconfig)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kctl: the kubeconfig %s "+
				"(Options.Kubeconfig, a --kubeconfig flag) "+
				"does not exist: correct the path, or give "+
				"none to use $KUBECONFIG, the in-cluster "+
				"service account or ~/.kube/config",
				kubeconfig)
		}
		k.what = "the kubeconfig " + kubeconfig
		k.rules.ExplicitPath = kubeconfig
		return k.load()
	}
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env != "" {
		files, err := kubeconfigEnv(env, log)
		if err != nil {
			return nil, err
		}
		k.what = "$KUBECONFIG (" + env + ")"
		k.rules.Precedence = files
		return k.load()
	}
	cfg, err := rest.InClusterConfig()
	if !errors.Is(err, rest.ErrNotInCluster) {
		if err != nil {
			return nil, fmt.Errorf(
				"kctl: loading the in-cluster configuration: %w", err)
		}
		if kubeContext != "" {
			return nil, fmt.Errorf("kctl: kubeconfig context %q "+
				"asked, but the configuration is the in-cluster "+
				"service account, which has none: "+
				"pass a kubeconfig too, or no context",
				kubeContext)
		}
		return cfg, nil
	}
	home := filepath.Join(
		homedir.HomeDir(),
		clientcmd.RecommendedHomeDir,
		clientcmd.RecommendedFileName,
	)
	if _, err := os.Stat(home); err == nil {
		k.what = home
		k.rules.ExplicitPath = home
		return k.load()
	}
	return nil, fmt.Errorf("kctl: no cluster configuration found; "+
		"tried the --kubeconfig flag (not given), "+
		"$KUBECONFIG (not set), "+
		"the in-cluster service account "+
		"(KUBERNETES_SERVICE_HOST/PORT not set) "+
		"and %s (does not exist): "+
		"pass --kubeconfig or set $KUBECONFIG", home)
}

// kubeconfigEnv returns the files $KUBECONFIG (env) lists that exist,
// logging a warning for each one that does not. None existing is an
// error: client-go would load an empty configuration and say only
// that none was provided.
func kubeconfigEnv(
	env string,
	log *slog.Logger,
) ([]string, error) {
	var found []string
	var missing []string
	for _, f := range filepath.SplitList(env) {
		_, err := os.Stat(f)
		switch {
		case f == "":
			// an empty entry, as in "a::b"
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, f)
		default:
			// present, or unreadable: loading says why
			found = append(found, f)
		}
	}
	if len(found) == 0 && len(missing) == 0 {
		return nil, fmt.Errorf("kctl: $KUBECONFIG (%q) "+
			"names no file: correct or unset it", env)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("kctl: $KUBECONFIG names %s, "+
			"and no such file exists: correct $KUBECONFIG, "+
			"or unset it to use the in-cluster service account "+
			"or ~/.kube/config", strings.Join(missing, ", "))
	}
	for _, f := range missing {
		log.Warn("kctl: $KUBECONFIG names a file that "+
			"does not exist; loading the others",
			"file", f)
	}
	return found, nil
}

// kubeconfigLoad is one load of kubeconfig files: rules name them,
// what names them in errors and warnings, context is the one to use
// ("": the current one), and log gets the warnings.
type kubeconfigLoad struct {
	what    string
	rules   clientcmd.ClientConfigLoadingRules
	context string
	log     *slog.Logger
}

// load loads the configuration of k.context, warning once if its
// cluster skips TLS verification.
func (k *kubeconfigLoad) load() (*rest.Config, error) {
	overrides := &clientcmd.ConfigOverrides{
		CurrentContext: k.context,
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&k.rules,
		overrides,
	)
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kctl: loading %s: %w", k.what, err)
	}
	_, ok := raw.Contexts[k.context]
	if k.context != "" && !ok {
		names := slices.Sorted(maps.Keys(raw.Contexts))
		return nil, fmt.Errorf("kctl: %s has no context %q: "+
			"pick one of %q", k.what, k.context, names)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kctl: loading %s: %w", k.what, err)
	}
	if cfg.Insecure {
		k.warnInsecure(raw)
	}
	return cfg, nil
}

// warnInsecure warns that the cluster of the context used skips TLS
// verification.
func (k *kubeconfigLoad) warnInsecure(raw clientcmdapi.Config) {
	name := cmp.Or(k.context, raw.CurrentContext)
	cluster := ""
	c := raw.Contexts[name]
	if c != nil {
		cluster = c.Cluster
	}
	k.log.Warn(fmt.Sprintf("kctl: cluster %q in %s sets "+
		"insecure-skip-tls-verify: the API server's certificate "+
		"is not checked; set certificate-authority-data instead",
		cluster, k.what),
		"cluster", cluster,
		"context", name)
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
// you make counts nothing. The server's warnings (the Warning header of an
// answer: a deprecated API, an unknown field in a write) are logged at
// level WARN once per distinct text, as client-go logs them: a Manager's
// to Options.Logger, one you make to slog.Default(). It remembers the
// last 1024 distinct texts (by a 64-bit hash: 46 KB at most, measured);
// one forgotten is logged again if it comes back. Make one with NewConn;
// the zero value is unusable. A Conn is safe for concurrent use and holds
// no goroutines.
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
	// warnings logs the server's Warning headers, once per text.
	warnings *warnings.Log
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
		base:     *base,
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

// logWarningsTo makes c log the server's warnings to log.
func (c *Conn) logWarningsTo(log *slog.Logger) {
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
		c.warnings.Header(resp.Header, call)
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

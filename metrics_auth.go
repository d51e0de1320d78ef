package kctl

// An extra: ServeSecureMetrics, the metrics page over HTTPS for scrapers
// that the API server authenticates (TokenReview) and authorizes
// (SubjectAccessReview), as kubebuilder projects serve it.

import (
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/certs"
	"github.com/kctl-dev/kctl/internal/certwatch"
	"github.com/kctl-dev/kctl/internal/serve"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// ServeSecureMetrics serves the metrics page at /metrics over HTTPS (TLS
// 1.2 or later) on addr, e.g. ":8443", to scrapers allowed to read it:
//
//   - the request must carry a bearer token (Authorization: Bearer ...),
//     which the API server must accept (a TokenReview), else 401;
//   - its user must be allowed to get the non-resource URL /metrics
//     (a SubjectAccessReview), else 403.
//
// Neither a 401 nor a 403 renders the page. Each verdict is kept 10 s per
// token (a rejected token's, 5 s), so a scrape every 10 s or more costs
// two small requests, and a token revoked or a right removed takes effect
// within 10 s. No caller can slow the Manager's own requests with tokens:
// the reviews go through a connection of their own, with a rate limit of
// its own (20 requests a second, burst 40). At most 10 tokens a second
// (after a burst of 20) that have no verdict, or a rejected one, are
// reviewed; past that a request is answered 429 with Retry-After: 1. A
// token the API server has authenticated before is reviewed again when
// its verdict expires, past that bound, so that a flood of new tokens
// cannot keep a real scraper out. The cache keeps the 1024 tokens used
// last: at most 120 others can be reviewed within a verdict's 10 s, so a
// flood never evicts one early. The Manager's own identity needs to
// create tokenreviews and subjectaccessreviews (bind the ClusterRole
// system:auth-delegator). A Prometheus needs, bound to its
// ServiceAccount:
//
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: ClusterRole
//	metadata: {name: metrics-reader}
//	rules:
//	- nonResourceURLs: ["/metrics"]
//	  verbs: ["get"]
//
// and a scrape config with scheme https, its ServiceAccount token as
// authorization credentials_file, and the server's CA as tls_config
// ca_file (or insecure_skip_verify with a self-signed certificate).
//
// The certificate is certDir/tls.crt with its key certDir/tls.key,
// reloaded on change as webhook.Serve does; with certDir "" a self-signed
// one is made in memory at start. It is Add of a Runnable named
// "metrics", so call it before Start (and not with ServeMetrics); "" adds
// nothing.
func (m *Manager) ServeSecureMetrics(addr, certDir string) error {
	if addr == "" {
		return nil
	}
	tlsConfig, err := m.metricsTLS(certDir)
	if err != nil {
		return err
	}
	Declare[tokenReview](Resource{
		Group:   "authentication.k8s.io",
		Version: "v1",
		Kind:    "TokenReview",
	})
	Declare[accessReview](Resource{
		Group:   "authorization.k8s.io",
		Version: "v1",
		Kind:    "SubjectAccessReview",
	})
	conn, err := m.reviewConn()
	if err != nil {
		return err
	}
	auth := &metricsAuth{
		tokens:   NewClient[tokenReview](conn),
		access:   NewClient[accessReview](conn),
		log:      m.log,
		verdicts: newVerdicts(maxVerdicts),
		limit: flowcontrol.NewTokenBucketRateLimiter(
			reviewRate, reviewBurst),
	}
	spec := m.metricsServer(addr)
	spec.Handler = auth.wrap(spec.Handler)
	spec.TLS = serve.TLS(tlsConfig)
	return m.Add(m.runnable(spec))
}

// metricsTLS is the TLS of ServeSecureMetrics: certDir's pair, reloaded
// on change, or a self-signed one if certDir is "".
func (m *Manager) metricsTLS(certDir string) (*tls.Config, error) {
	cfg := &tls.Config{}
	if certDir != "" {
		certFile := filepath.Join(certDir, "tls.crt")
		keyFile := filepath.Join(certDir, "tls.key")
		w, err := certwatch.New(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("kctl: secure metrics: %w; "+
				"pass the directory that holds it, or \"\" "+
				"for a self-signed certificate", err)
		}
		w.OnError = func(err error) {
			m.log.Error("kctl: secure metrics: " + err.Error())
		}
		cfg.GetCertificate = w.GetCertificate
		return cfg, nil
	}
	pair, err := selfSigned()
	if err != nil {
		return nil, fmt.Errorf("kctl: secure metrics: "+
			"making a self-signed certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// selfSigned makes a serving certificate of a CA of its own.
func selfSigned() (tls.Certificate, error) {
	ca, err := certs.NewCA("kctl metrics (self-signed)")
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM, keyPEM, _, err := ca.Serving("localhost", "127.0.0.1")
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// The limits of ServeSecureMetrics's token reviews.
const (
	// verdictTTL is how long an allowed or forbidden verdict is kept:
	// 10 s. A token revoked or a right removed takes effect within it.
	verdictTTL = 10 * time.Second
	// rejectedTTL is how long a token the API server did not
	// authenticate is kept: 5 s, so that a scraper retrying a bad token
	// costs a review at most every 5 s, and one rejected while the API
	// server's authenticator failed gets in soon after it recovers.
	rejectedTTL = 5 * time.Second
	// maxVerdicts bounds the cache: 1024 tokens, the least recently used
	// evicted first. It must exceed reviewBurst + reviewRate *
	// verdictTTL (120), the tokens that can be reviewed within a TTL, so
	// that no verdict is evicted within its TTL; a scraper whose last
	// scrape is less than (1024-20)/10 = 100 s old is still known.
	maxVerdicts = 1024
	// reviewRate and reviewBurst bound the reviews of tokens that have
	// no verdict, or a rejected one: 10 a second, 20 at once. Past them
	// the request is answered 429 with Retry-After: 1. A token the API
	// server authenticated before is reviewed past the bound: the
	// ServiceAccounts of real scrapers are few.
	reviewRate  = 10
	reviewBurst = 20
	// reviewQPS and reviewQPSBurst are the client-side rate limit of the
	// reviews' connection (reviewConn), of its own: 20 requests a second,
	// 40 at once: a review costs one request (rejected) or two.
	reviewQPS      = 2 * reviewRate
	reviewQPSBurst = 2 * reviewBurst
)

// reviewConn is the connection of the reviews: the Manager's
// configuration with a transport and a rate limit of its own, so that no
// caller of the metrics page takes the place of the Manager's requests in
// its rate limiter or its connection. Its requests count on the Manager's
// metrics page as its own do. (A Transport set in Options.Config is
// shared; there is nothing else to use.)
func (m *Manager) reviewConn() (*Conn, error) {
	cfg := rest.CopyConfig(m.config)
	cfg.QPS = reviewQPS
	cfg.Burst = reviewQPSBurst
	if cfg.Proxy == nil {
		// client-go shares one transport between equal configurations,
		// but never one with a Proxy func: this makes it its own.
		cfg.Proxy = http.ProxyFromEnvironment
	}
	conn, err := NewConn(cfg)
	if err != nil {
		return nil, fmt.Errorf("kctl: secure metrics: %w", unprefixed(err))
	}
	conn.requests = m.metrics.Requests
	conn.logWarningsTo(m.log)
	return conn, nil
}

// metricsAuth lets a request through to the page only if its bearer token
// is authenticated and its user authorized to get /metrics. Verdicts are
// cached by the token's SHA-256 (verdictTTL, rejectedTTL); an error of the
// API server is not cached. It is safe for concurrent use.
type metricsAuth struct {
	tokens   *Client[tokenReview]
	access   *Client[accessReview]
	log      *slog.Logger
	verdicts *verdicts
	// limit bounds the reviews of tokens not known to the API server
	// (reviewRate, reviewBurst).
	limit flowcontrol.RateLimiter
}

// wrap lets only allowed requests reach page.
func (a *metricsAuth) wrap(page http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Unauthorized: a bearer token is required",
				http.StatusUnauthorized)
			return
		}
		code, err := a.check(r.Context(), token)
		switch {
		case err != nil:
			a.log.Error("kctl: secure metrics: "+err.Error(),
				"remote", r.RemoteAddr)
			http.Error(w, "Internal Server Error: "+
				"the API server could not check the token",
				http.StatusInternalServerError)
		case code == http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too Many Requests: too many new tokens "+
				"to review", code)
		case code == http.StatusUnauthorized:
			http.Error(w, "Unauthorized", code)
		case code == http.StatusForbidden:
			http.Error(w, "Forbidden: get /metrics is not allowed", code)
		default:
			page.ServeHTTP(w, r)
		}
	})
}

// check returns the verdict for token: from the cache, or the reviews, or
// 429 if token needs a review past the bound.
func (a *metricsAuth) check(ctx context.Context, token string) (int, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	v, found := a.verdicts.get(key)
	if found && now.Before(v.until) {
		return v.code, nil
	}
	authenticated := found && v.code != http.StatusUnauthorized
	if !authenticated && !a.limit.TryAccept() {
		return http.StatusTooManyRequests, nil
	}
	code, err := a.review(ctx, token)
	if err != nil {
		return 0, err
	}
	ttl := verdictTTL
	if code == http.StatusUnauthorized {
		ttl = rejectedTTL
	}
	a.verdicts.put(key, verdict{code: code, until: now.Add(ttl)})
	return code, nil
}

// review asks the API server who token is (401 if nobody) and whether
// they may get /metrics (403 if not); 200 lets the request through.
func (a *metricsAuth) review(ctx context.Context, token string) (int, error) {
	tr := &tokenReview{}
	tr.Spec.Token = token
	err := a.tokens.Create(ctx, tr)
	if err != nil {
		return 0, fmt.Errorf("reviewing a token: %w", unprefixed(err))
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	user := tr.Status.User
	sar := &accessReview{}
	sar.Spec.User = user.Username
	sar.Spec.UID = user.UID
	sar.Spec.Groups = user.Groups
	sar.Spec.Extra = user.Extra
	sar.Spec.NonResourceAttributes.Path = "/metrics"
	sar.Spec.NonResourceAttributes.Verb = "get"
	err = a.access.Create(ctx, sar)
	if err != nil {
		return 0, fmt.Errorf("reviewing %s's access to /metrics: %w",
			user.Username, unprefixed(err))
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// tokenReview is authentication.k8s.io/v1's TokenReview, the fields kctl
// sends and reads. kctl does not import k8s.io/api/authentication/v1: an
// API package's type registration links it into every program.
type tokenReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Token string `json:"token"`
	} `json:"spec"`
	Status struct {
		Authenticated bool     `json:"authenticated"`
		User          UserInfo `json:"user"`
	} `json:"status"`
}

// accessReview is authorization.k8s.io/v1's SubjectAccessReview of a
// non-resource URL, the fields kctl sends and reads.
type accessReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		NonResourceAttributes struct {
			Path string `json:"path"`
			Verb string `json:"verb"`
		} `json:"nonResourceAttributes"`
		User   string              `json:"user"`
		UID    string              `json:"uid,omitempty"`
		Groups []string            `json:"groups,omitempty"`
		Extra  map[string][]string `json:"extra,omitempty"`
	} `json:"spec"`
	Status struct {
		Allowed bool `json:"allowed"`
	} `json:"status"`
}

// verdict is the answer for one token: the status code to send (200 lets
// it through) until a time.
type verdict struct {
	code  int
	until time.Time
}

// verdicts holds at most max verdicts by token hash, evicting the least
// recently used one to make room. Expired verdicts stay until evicted:
// check tells from one whether the API server authenticated the token.
// It is safe for concurrent use.
type verdicts struct {
	mu  sync.Mutex
	max int
	// byKey and used hold the same entries (*verdictEntry), used in
	// order of use, the most recent first.
	byKey map[[32]byte]*list.Element
	used  list.List
}

type verdictEntry struct {
	key [32]byte
	verdict
}

func newVerdicts(max int) *verdicts {
	return &verdicts{max: max, byKey: map[[32]byte]*list.Element{}}
}

// get returns key's verdict, expired or not, and counts it as used.
func (c *verdicts) get(key [32]byte) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return verdict{}, false
	}
	c.used.MoveToFront(e)
	return e.Value.(*verdictEntry).verdict, true
}

// put stores v for key as used now, evicting the least recently used
// verdict if there is no room for it.
func (c *verdicts) put(key [32]byte, v verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if ok {
		e.Value.(*verdictEntry).verdict = v
		c.used.MoveToFront(e)
		return
	}
	if len(c.byKey) >= c.max {
		last := c.used.Back()
		c.used.Remove(last)
		delete(c.byKey, last.Value.(*verdictEntry).key)
	}
	entry := &verdictEntry{key: key, verdict: v}
	c.byKey[key] = c.used.PushFront(entry)
}

package kctl

// An extra: ServeSecureMetrics, the metrics page over HTTPS for scrapers
// that the API server authenticates (TokenReview) and authorizes
// (SubjectAccessReview), as kubebuilder projects serve it.

import (
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServeSecureMetrics serves the metrics page at /metrics over HTTPS (TLS
// 1.2 or later) on addr, e.g. ":8443", to scrapers allowed to read it:
//
//   - the request must carry a bearer token (Authorization: Bearer ...),
//     which the API server must accept (a TokenReview), else 401;
//   - its user must be allowed to get the non-resource URL /metrics
//     (a SubjectAccessReview), else 403.
//
// Neither a 401 nor a 403 renders the page. Both reviews go through the
// Manager's connection; each verdict is kept 10 s per token, so a scrape
// every 10 s or more costs two small requests, and a token revoked or a
// right removed takes effect within 10 s. The Manager's own identity
// needs to create tokenreviews and subjectaccessreviews (bind the
// ClusterRole system:auth-delegator). A Prometheus needs, bound to its
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
// reloaded on change as ServeWebhooks does; with certDir "" a self-signed
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
	auth := &metricsAuth{
		tokens: NewClient[tokenReview](m.conn),
		access: NewClient[accessReview](m.conn),
		log:    m.log,
		ttl:    10 * time.Second,
		cache:  map[[32]byte]verdict{},
	}
	spec := m.metricsServer(addr)
	spec.handler = auth.wrap(spec.handler)
	spec.tls = serveTLS(tlsConfig)
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

// metricsAuth lets a request through to the page only if its bearer token
// is authenticated and its user authorized to get /metrics. Verdicts are
// cached by the token's SHA-256 for ttl; an error of the API server is
// not cached. It is safe for concurrent use.
type metricsAuth struct {
	tokens *Client[tokenReview]
	access *Client[accessReview]
	log    *slog.Logger
	ttl    time.Duration

	mu sync.Mutex
	// cache holds at most maxVerdicts verdicts.
	cache map[[32]byte]verdict
}

// verdict is the answer for one token: the status code to send (200 lets
// it through) until a time.
type verdict struct {
	code  int
	until time.Time
}

// maxVerdicts bounds the cache: scrapers are few, tokens per scraper few.
const maxVerdicts = 1024

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
		case code == http.StatusUnauthorized:
			http.Error(w, "Unauthorized", code)
		case code == http.StatusForbidden:
			http.Error(w, "Forbidden: get /metrics is not allowed", code)
		default:
			page.ServeHTTP(w, r)
		}
	})
}

// check returns the verdict for token, from the cache or the reviews.
func (a *metricsAuth) check(ctx context.Context, token string) (int, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	v, found := a.cache[key]
	a.mu.Unlock()
	if found && now.Before(v.until) {
		return v.code, nil
	}
	code, err := a.review(ctx, token)
	if err != nil {
		return 0, err
	}
	a.remember(key, verdict{code: code, until: now.Add(a.ttl)}, now)
	return code, nil
}

// remember caches v for key, first dropping expired verdicts if the cache
// is full, and all of them if it is still full.
func (a *metricsAuth) remember(key [32]byte, v verdict, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxVerdicts {
		for k, old := range a.cache {
			if !now.Before(old.until) {
				delete(a.cache, k)
			}
		}
	}
	if len(a.cache) >= maxVerdicts {
		clear(a.cache)
	}
	a.cache[key] = v
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

package kctl

// An extra: ServeSecureMetrics, the metrics page over HTTPS for scrapers
// that the API server authenticates (TokenReview) and authorizes
// (SubjectAccessReview), as kubebuilder projects serve it.

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/kctl-dev/kctl/internal/certs"
	"github.com/kctl-dev/kctl/internal/certwatch"
	"github.com/kctl-dev/kctl/internal/metricsauth"
	"github.com/kctl-dev/kctl/internal/serve"
	"k8s.io/client-go/rest"
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
	Declare[metricsauth.TokenReview](Resource{
		Group:   "authentication.k8s.io",
		Version: "v1",
		Kind:    "TokenReview",
	})
	Declare[metricsauth.AccessReview](Resource{
		Group:   "authorization.k8s.io",
		Version: "v1",
		Kind:    "SubjectAccessReview",
	})
	conn, err := m.reviewConn()
	if err != nil {
		return err
	}
	tokens := NewClient[metricsauth.TokenReview](conn)
	access := NewClient[metricsauth.AccessReview](conn)
	auth := metricsauth.New(tokens, access, m.log)
	spec := m.metricsServer(addr)
	spec.Handler = auth.Wrap(spec.Handler)
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

// reviewConn is the connection of the reviews: the Manager's
// configuration with a transport and a rate limit of its own, so that no
// caller of the metrics page takes the place of the Manager's requests in
// its rate limiter or its connection. Its requests count on the Manager's
// metrics page as its own do. (A Transport set in Options.Config is
// shared; there is nothing else to use.)
func (m *Manager) reviewConn() (*Conn, error) {
	cfg := rest.CopyConfig(m.config)
	cfg.QPS = metricsauth.ReviewQPS
	cfg.Burst = metricsauth.ReviewQPSBurst
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

// Package webhook serves a Manager's admission webhooks (Validate,
// Default) and conversion webhooks (Convert) over HTTPS, typed by the Go
// types kctl watches:
//
//	hooks, err := webhook.Serve(mgr, ":9443", "/tmp/k8s-webhook-server/serving-certs")
//	if err != nil { ... }
//	webhook.Validate(hooks, validateWidget)
//	webhook.Default(hooks, defaultWidget)
//
// The server runs on every replica, with a certificate reloaded from disk
// (internal/certwatch) or made and renewed by the program itself
// (ServeWithCertificates), controller-runtime's webhook metrics, a bound on
// requests in flight, each review's deadline, and a graceful shutdown
// within the Manager's. It uses only kctl's exported API; a program that
// does not import it links none of it.
package webhook

// The server: Serve, its options, and what every review goes through.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certwatch"
	"github.com/kctl-dev/kctl/internal/errtext"
	"github.com/kctl-dev/kctl/internal/serve"
)

// Server serves a Manager's admission webhooks (Validate, Default)
// and conversion webhooks (Convert) over HTTPS. Get it from
// Serve, then register the webhooks on it, before or after Start.
// It is safe for concurrent use.
//
// The paths are kubebuilder's, so its manifests work unchanged:
//
//	/validate-<group>-<version>-<kind>  Validate (group's dots as dashes,
//	                                    kind in lower case; the core
//	                                    group gives /validate--v1-pod)
//	/mutate-<group>-<version>-<kind>    Default
//	/convert                            Convert, every CRD's
type Server struct {
	mgr *kctl.Manager
	// certs serve the certificate; nil if addr was "".
	certs *certwatch.Watcher
	// mux routes a path to its webhook; a path is registered once.
	mux *http.ServeMux
	// inFlight counts the requests being served, over every path; one
	// past maxInFlight is answered 429 (serveBounded).
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	// metrics are the server's series; nil if addr was "".
	metrics *serverMetrics

	mu sync.Mutex
	// paths are the paths registered.
	paths map[string]bool
	// conversions are the Convert pairs, by group and kind
	// ("widgets.example.com/Widget"); see conversion.go.
	conversions map[string]conversion
}

// maxReviewBytes bounds a review's body, as controller-runtime's 7 MiB: an
// object is at most 1.5 MiB in etcd, and an UPDATE's review holds two of
// them. A longer body is refused with 413 before it is decoded.
const maxReviewBytes = 7 << 20

// defaultMaxInFlight is MaxInFlight's default: a maximal review takes
// 15-17 MiB of heap while it is served; 16 at once peaked at 290 MiB.
const defaultMaxInFlight = 16

// Serve serves the webhooks registered on the server it returns,
// over HTTPS on addr (e.g. ":9443", kubebuilder's port) while mgr
// runs, with the certificate certDir/tls.crt and its key certDir/tls.key
// (the names of a kubernetes.io/tls Secret, and of cert-manager's), or,
// with certDir "", a self-signed one for 127.0.0.1 and localhost, for a
// program run on a laptop: the log says how to point a webhook
// configuration at it (ServeWithCertificates makes one for a cluster):
//
//	hooks, err := webhook.Serve(mgr, ":9443", "/tmp/k8s-webhook-server/serving-certs")
//	if err != nil { ... }
//	webhook.Validate(hooks, validateWidget)
//	webhook.Default(hooks, defaultWidget)
//
// The server runs on every replica, from Start on and before the leader
// election, as the API server calls any replica behind the Service. It
// speaks TLS 1.2 or later and HTTP/1.1.
//
// The certificate and key are read again at each TLS handshake and each
// request, and every 10 s. A new pair (cert-manager's rotation, a
// Secret's update) is swapped in only if it can serve: it parses, is
// valid now, and covers the names the server is reached by
// (CertificateNames, or else every name of the pair served). Any other (a
// pair half written, for another name, expired or not valid yet) is
// logged once per change of the files, naming why; the last good pair
// goes on serving, the gauge kctl_webhook_certificate_rejected is 1, and
// the readiness check "webhook-certificate" shows why on /readyz?verbose
// (it fails only while the pair served itself is not valid now).
// Connections and requests in flight keep the pair they have; a
// connection made with an older pair is closed once its answer is
// written, so that the API server's next call makes a new one.
//
// The server bounds its work. It serves MaxInFlight requests at once
// (16 unless set) and answers any more 429 with Retry-After: 1, which the
// API server retries. Each webhook's function gets a context that ends
// at the review's deadline: the webhook's timeoutSeconds, which the API
// server sends as the request's timeout parameter (10 s when absent, at
// most 30 s). A request has 30 s to arrive and 40 s to be answered. When
// the Manager shuts down, the server stops listening and lets the answers
// in flight finish until its DrainDeadline (ShutdownTimeout less its
// reserve, see Start); it then closes the connections still busy.
//
// Its metrics are on the Manager's page (ServeMetrics), under
// controller-runtime's names: controller_runtime_webhook_requests_total
// {code,webhook}, controller_runtime_webhook_latency_seconds{webhook} and
// controller_runtime_webhook_requests_in_flight{webhook}, with webhook the
// path; and kctl_webhook_certificate_rejected.
//
// It is mgr.Add of a Runnable named "webhooks", so call it before Start;
// an addr of "" serves nothing, and the webhooks registered on the server
// it returns are never called. Serve fails if the pair does not load, or
// if mgr serves webhooks already: one server serves them all.
func Serve(mgr *kctl.Manager, addr, certDir string) (*Server, error) {
	srv := &Server{
		mgr:         mgr,
		mux:         http.NewServeMux(),
		paths:       map[string]bool{},
		conversions: map[string]conversion{},
	}
	srv.maxInFlight.Store(defaultMaxInFlight)
	if addr == "" {
		return srv, nil
	}
	certDir, err := certificateDir(mgr, addr, certDir)
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(certDir, "tls.crt")
	keyFile := filepath.Join(certDir, "tls.key")
	watcher, err := certwatch.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("kctl: webhook server: %w; "+
			"make it (cert-manager, or example/crd/gencert "+
			"for a local run) or pass the directory that holds it", err)
	}
	srv.certs = watcher
	srv.metrics, err = newServerMetrics(mgr.Metrics().Reserved())
	if err != nil {
		return nil, fmt.Errorf("kctl: webhook server: %w; serve every "+
			"webhook of a Manager from one server", unprefixed(err))
	}
	watcher.OnChange = srv.certificateChanged
	mgr.AddNotedReadyCheck("webhook-certificate",
		srv.certificateReady, srv.certificateNote)
	spec := serve.Spec{
		Name:        "webhooks",
		Addr:        addr,
		Handler:     srv.mux,
		Read:        30 * time.Second,
		Write:       40 * time.Second,
		TLS:         serve.TLS(&tls.Config{GetCertificate: watcher.GetCertificate}),
		ConnContext: watcher.ConnContext,
		DrainBy:     mgr.DrainDeadline,
		Busy:        srv.busy,
	}
	r := kctl.Runnable{
		Name: spec.Name,
		Run:  func(ctx context.Context) error { return srv.run(ctx, spec) },
		Busy: srv.busy,
	}
	err = mgr.Add(r)
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// MaxInFlight sets how many requests srv serves at once, over all its
// webhooks, and returns srv. One more is answered 429 Too Many Requests
// with Retry-After: 1, its body dropped undecoded; the API server retries it
// (within the webhook's timeout), and
// controller_runtime_webhook_requests_total counts it with code 429.
// Defaults to 16. A function that ignores its context keeps its request
// in flight. n < 1 is a mistake reported by Manager.Start.
func (srv *Server) MaxInFlight(n int) *Server {
	if n < 1 {
		srv.mgr.ReportMisuse(fmt.Errorf("kctl: MaxInFlight(%d): "+
			"the webhook server must serve at least 1 request", n))
		return srv
	}
	srv.maxInFlight.Store(int64(n))
	return srv
}

// CertificateNames sets the names (DNS names or IP addresses) the API
// server reaches srv by, e.g. the Service's "name.namespace.svc", and
// returns srv: a new pair on disk is swapped in only if it covers each.
// By default it must cover every name of the pair served.
func (srv *Server) CertificateNames(names ...string) *Server {
	if srv.certs != nil {
		srv.certs.SetNames(names...)
	}
	return srv
}

// busy says how many requests are in flight, for the log of a shutdown
// that cuts them.
func (srv *Server) busy() string {
	return fmt.Sprintf("%d requests in flight", srv.inFlight.Load())
}

// handle registers h at path, measured as controller-runtime measures
// webhooks, bounded (serveBounded), closing a connection of an older
// certificate after the answer. A path registered before is a mistake,
// reported as misuse (see Manager.Start).
func (srv *Server) handle(path string, h http.Handler) {
	srv.mu.Lock()
	taken := srv.paths[path]
	srv.paths[path] = true
	srv.mu.Unlock()
	if taken {
		srv.mgr.ReportMisuse(fmt.Errorf("kctl: webhook %s is registered twice; "+
			"register one function per kind and path", path))
		return
	}
	if srv.metrics == nil {
		return // Serve's addr was "": nothing serves the path
	}
	log := srv.mgr.Logger().With("webhook", path)
	observed := srv.metrics.of(path)
	measured := func(w http.ResponseWriter, r *http.Request) {
		stale := srv.certs != nil && srv.certs.Stale(r.Context())
		if stale {
			w.Header().Set("Connection", "close")
		}
		observed.started()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		srv.serveBounded(sw, r, h, log)
		observed.finished(sw.code, time.Since(start))
	}
	srv.mux.HandleFunc(path, measured)
}

// serveBounded serves r with h, with a context that ends at the review's
// deadline (reviewTimeout) and carries log, unless srv serves maxInFlight
// requests already: then it answers 429.
func (srv *Server) serveBounded(w http.ResponseWriter, r *http.Request, h http.Handler, log *slog.Logger) {
	n := srv.inFlight.Add(1)
	limit := srv.maxInFlight.Load()
	if n > limit {
		srv.inFlight.Add(-1)
		refuse(w, r, limit)
		return
	}
	defer srv.inFlight.Add(-1)
	timeout := reviewTimeout(r.URL.Query().Get("timeout"))
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ctx = kctl.WithLogger(ctx, log)
	h.ServeHTTP(w, r.WithContext(ctx))
}

// refuse answers 429 to a request past the limit of requests in flight,
// after reading its body into nothing (so that the client, still
// sending, gets the answer and not a reset connection).
func refuse(w http.ResponseWriter, r *http.Request, limit int64) {
	io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxReviewBytes))
	w.Header().Set("Retry-After", "1")
	msg := fmt.Sprintf("kctl: the webhook server serves %d requests "+
		"at once (MaxInFlight); retry", limit)
	http.Error(w, msg, http.StatusTooManyRequests)
}

// reviewTimeout is how long a review may take: the webhook's
// timeoutSeconds, which the API server sends as the request's timeout
// parameter ("10s"), at most 30 s (the most timeoutSeconds allows); 10 s
// (its default) when param is absent or not a positive duration.
func reviewTimeout(param string) time.Duration {
	d, err := time.ParseDuration(param)
	if err != nil || d <= 0 {
		return 10 * time.Second
	}
	return min(d, 30*time.Second)
}

// run serves spec until ctx ends, reading the certificate files every
// 10 s meanwhile (so that a pair rejected is logged and counted without
// traffic), then shuts the server down gracefully (spec.DrainBy). It
// returns once that is done.
func (srv *Server) run(ctx context.Context, spec serve.Spec) error {
	watchCtx, stop := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer watching.Wait()
	defer stop()
	watching.Go(func() { srv.watchCertificate(watchCtx) })
	spec.Attrs = []any{"maxInFlight", srv.maxInFlight.Load()}
	return spec.Serve(ctx, kctl.LoggerFrom(ctx))
}

// watchCertificate reads the certificate files every 10 s until ctx ends.
func (srv *Server) watchCertificate(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			srv.certs.Status()
		}
	}
}

// certificateChanged is certwatch's OnChange: it logs why a pair is
// not served, and sets the gauge.
func (srv *Server) certificateChanged(rejected error) {
	if rejected == nil {
		srv.metrics.certRejected.Set(0)
		return
	}
	srv.metrics.certRejected.Set(1)
	srv.mgr.Logger().Error("kctl: webhook server: " + rejected.Error() +
		"; write a pair that covers the names and is valid now")
}

// certificateReady is the readiness check "webhook-certificate": it
// fails while the pair served is not valid now, as every call of the API
// server then fails. A pair on disk that is not served shows in its note
// only: the last good one serves.
func (srv *Server) certificateReady(*http.Request) error {
	served, rejected := srv.certs.Status()
	now := time.Now()
	valid := !now.Before(served.NotBefore) && !now.After(served.NotAfter)
	if valid {
		return nil
	}
	err := fmt.Errorf("kctl: the webhook server's certificate is valid from %s to %s only; "+
		"write a new pair", served.NotBefore.UTC(), served.NotAfter.UTC())
	return errors.Join(err, rejected)
}

// certificateNote is the note of the readiness check: the pair served,
// and why the files' pair is not, if it is not.
func (srv *Server) certificateNote() string {
	served, rejected := srv.certs.Status()
	note := "serving a certificate for " +
		strings.Join(certwatch.Names(served), ", ") + " until " +
		served.NotAfter.UTC().Format(time.RFC3339)
	if rejected != nil {
		note += "; " + rejected.Error()
	}
	return note
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// webhookPath is kubebuilder's path of a webhook of kind prefix
// ("validate", "mutate") for r.
func webhookPath(prefix string, r kctl.Resource) string {
	group := strings.ReplaceAll(r.Group, ".", "-")
	kind := strings.ToLower(r.Kind)
	return "/" + prefix + "-" + group + "-" + r.Version + "-" + kind
}

// readReview reads a review's body into out with decode, answering the
// request itself, with a 4xx and a message saying what is wrong, when it
// cannot: not a POST of JSON, too long, or not decodable. It reports
// whether the caller should go on.
func readReview(
	w http.ResponseWriter,
	r *http.Request,
	kind string,
	decode func([]byte) error,
) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "kctl: a "+kind+" is POSTed", http.StatusMethodNotAllowed)
		return false
	}
	mediaType, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if strings.TrimSpace(mediaType) != "application/json" {
		http.Error(w, "kctl: a "+kind+" must be sent as application/json, not "+
			r.Header.Get("Content-Type"), http.StatusUnsupportedMediaType)
		return false
	}
	body := http.MaxBytesReader(w, r.Body, maxReviewBytes)
	data, err := io.ReadAll(body)
	var tooLong *http.MaxBytesError
	if errors.As(err, &tooLong) {
		http.Error(w, fmt.Sprintf("kctl: the %s is longer than %d bytes",
			kind, maxReviewBytes), http.StatusRequestEntityTooLarge)
		return false
	}
	if err != nil {
		http.Error(w, "kctl: reading the "+kind+": "+err.Error(),
			http.StatusBadRequest)
		return false
	}
	err = decode(data)
	if err != nil {
		msg := "kctl: the " + kind + " does not decode: " + err.Error()
		http.Error(w, msg, http.StatusBadRequest)
		return false
	}
	return true
}

// webhookRecover turns a panic of a webhook's function into err, a
// panicError, logged with its stack.
func webhookRecover(ctx context.Context, what string, err *error) {
	p := recover()
	if p == nil {
		return
	}
	kctl.LoggerFrom(ctx).Error("kctl: the "+what+" panicked",
		"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	*err = panicError{fmt.Sprintf("kctl: the %s panicked: %v", what, p)}
}

// panicError is a webhook function's panic; it denies with code 500.
type panicError struct{ msg string }

func (e panicError) Error() string { return e.msg }

// conversion converts the objects of one group and kind between the
// versions a and b (apiVersions, "group/version").
type conversion struct {
	a, b    string
	convert func(obj []byte, from, to string) ([]byte, error)
}

// decodeObject decodes one object of a review into a new T.
func decodeObject[T any](raw []byte, field string) (*T, error) {
	obj := new(T)
	err := json.Unmarshal(raw, obj)
	if err != nil {
		return nil, fmt.Errorf("kctl: the review's %s does not decode into %s: %w",
			field, typeName[T](), err)
	}
	return obj, nil
}

// writeJSON writes v as the answer.
func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "kctl: encoding the answer: "+err.Error(),
			http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// typeName is T's name with its package's, e.g. "v1.Pod" or "main.Widget".
func typeName[T any]() string {
	var zero T
	return fmt.Sprintf("%T", zero)
}

// unprefixed is err with its message's "kctl: " prefix dropped, so that
// a kctl error can wrap it with %w; errors.Is and errors.As see through it.
func unprefixed(err error) error { return errtext.Unprefixed(err) }

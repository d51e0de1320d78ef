package kctl

// An extra: the HTTPS server of a Manager's webhooks (ServeWebhooks), on
// every replica, with a certificate reloaded from disk
// (internal/certwatch) and controller-runtime's webhook metrics.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/certwatch"
)

// WebhookServer serves a Manager's admission webhooks (Validate, Default)
// and conversion webhooks (Convert) over HTTPS. Get it from
// ServeWebhooks, then register the webhooks on it, before or after Start.
// It is safe for concurrent use.
//
// The paths are kubebuilder's, so its manifests work unchanged:
//
//	/validate-<group>-<version>-<kind>  Validate (group's dots as dashes,
//	                                    kind in lower case; the core
//	                                    group gives /validate--v1-pod)
//	/mutate-<group>-<version>-<kind>    Default
//	/convert                            Convert, every CRD's
type WebhookServer struct {
	m *Manager
	// certs serve the certificate; nil if addr was "".
	certs *certwatch.Watcher
	// mux routes a path to its webhook; a path is registered once.
	mux *http.ServeMux

	mu sync.Mutex
	// paths are the paths registered.
	paths map[string]bool
	// conversions are the Convert pairs, by group and kind
	// ("widgets.example.com/Widget"); see webhook_conversion.go.
	conversions map[string]conversion
}

// maxReviewBytes bounds a review's body, as controller-runtime's 7 MiB: an
// object is at most 1.5 MiB in etcd, and an UPDATE's review holds two of
// them. A longer body is refused with 413 before it is decoded.
const maxReviewBytes = 7 << 20

// ServeWebhooks serves the webhooks registered on the server it returns,
// over HTTPS on addr (e.g. ":9443", kubebuilder's port) while the Manager
// runs, with the certificate certDir/tls.crt and its key certDir/tls.key
// (the names of a kubernetes.io/tls Secret, and of cert-manager's):
//
//	hooks, err := mgr.ServeWebhooks(":9443", "/tmp/k8s-webhook-server/serving-certs")
//	if err != nil { ... }
//	kctl.Validate(hooks, validateWidget)
//	kctl.Default(hooks, defaultWidget)
//
// The server runs on every replica, from Start on and before the leader
// election, as the API server calls any replica behind the Service. It
// speaks TLS 1.2 or later and HTTP/1.1. The certificate and key are read
// again at each TLS handshake that follows a change to either file
// (cert-manager's rotation, a Secret's update): connections and requests
// in flight keep the old one, nothing restarts; a pair that does not load
// (half written) is logged and the last good one goes on serving. Each
// request looks at the files too, and a connection made with an older
// pair is closed once its answer is written, so that the API server's
// next call makes a new one, with the new certificate.
//
// A request has 30 s to arrive and 40 s to be answered (the API server
// waits at most 30 s for a webhook). It is Add of a Runnable named
// "webhooks", so call it before Start; an addr of "" serves nothing, and
// the webhooks registered on the server it returns are never called.
// ServeWebhooks fails if the pair does not load.
func (m *Manager) ServeWebhooks(addr, certDir string) (*WebhookServer, error) {
	ws := &WebhookServer{
		m:           m,
		mux:         http.NewServeMux(),
		paths:       map[string]bool{},
		conversions: map[string]conversion{},
	}
	if addr == "" {
		return ws, nil
	}
	certFile := filepath.Join(certDir, "tls.crt")
	keyFile := filepath.Join(certDir, "tls.key")
	watcher, err := certwatch.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("kctl: webhook server: %w; "+
			"make it (cert-manager, or example/crd/gencert "+
			"for a local run) or pass the directory that holds it", err)
	}
	watcher.OnError = func(err error) {
		m.log.Error("kctl: webhook server: " + err.Error())
	}
	ws.certs = watcher
	spec := serverSpec{
		name:    "webhooks",
		addr:    addr,
		handler: ws.mux,
		read:    30 * time.Second,
		write:   40 * time.Second,
		tls: serveTLS(&tls.Config{
			GetCertificate: watcher.GetCertificate,
		}),
		connContext: watcher.ConnContext,
	}
	err = m.Add(m.runnable(spec))
	if err != nil {
		return nil, err
	}
	return ws, nil
}

// handle registers h at path, measured as controller-runtime measures
// webhooks, with LoggerFrom(ctx) naming the path, closing a connection
// of an older certificate after the answer. A path registered before is a
// mistake, reported as misuse (see Manager.Start).
func (ws *WebhookServer) handle(path string, h http.Handler) {
	ws.mu.Lock()
	taken := ws.paths[path]
	ws.paths[path] = true
	ws.mu.Unlock()
	if taken {
		ws.m.misuse(fmt.Errorf("kctl: webhook %s is registered twice; "+
			"register one function per kind and path", path))
		return
	}
	log := ws.m.log.With("webhook", path)
	observed := ws.m.metrics.Webhook(path)
	measured := func(w http.ResponseWriter, r *http.Request) {
		stale := ws.certs != nil && ws.certs.Stale(r.Context())
		if stale {
			w.Header().Set("Connection", "close")
		}
		observed.Started()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		ctx := context.WithValue(r.Context(), loggerKey{}, log)
		h.ServeHTTP(sw, r.WithContext(ctx))
		observed.Finished(sw.code, time.Since(start))
	}
	ws.mux.HandleFunc(path, measured)
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
func webhookPath(prefix string, r Resource) string {
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
	LoggerFrom(ctx).Error("kctl: the "+what+" panicked",
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

// Package certwatch serves a TLS certificate and key read from files and
// reloaded when they change on disk, for servers that must not restart
// when cert-manager (or a kubelet updating a mounted Secret) rotates them:
//
//	w, err := certwatch.New("/certs/tls.crt", "/certs/tls.key")
//	cfg := &tls.Config{GetCertificate: w.GetCertificate}
//
// Each TLS handshake, and each Stale or Status call, reads both files (a
// few kilobytes; modification times are too coarse to tell two quick
// writes apart) and judges them again when either changed. A pair is
// swapped in only if it can serve: it parses (its key matches its
// certificate), it is valid now, and it covers the names the server is
// reached by (SetNames, or else every name of the pair served). Any other
// pair (a rotation caught half-written, a certificate for another name,
// expired, or not valid yet) is not used: the last good pair goes on
// serving, the reason is told once to Watcher.OnError and OnChange, and
// Status reports it until the files change again. A pair rejected only
// for its time or names is judged again at each read, so one not valid
// yet is swapped in once it is.
//
// Connections open at a rotation keep their certificate; requests in
// flight are never dropped. A server that asks Stale for each request,
// and closes a connection after answering when it is, makes each
// client's next call after the rotation handshake anew, with the new
// pair:
//
//	srv.ConnContext = w.ConnContext
//	// in the handler:
//	if w.Stale(r.Context()) { rw.Header().Set("Connection", "close") }
package certwatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Watcher holds the current certificate. Make it with New; it is safe for
// concurrent use.
type Watcher struct {
	certFile, keyFile string
	// OnError, if set, is told why a pair on disk is not swapped in, once
	// per change on disk. Set it before the first handshake. It runs with
	// the Watcher locked: it must not call the Watcher's methods.
	OnError func(error)
	// OnChange, if set, is told of each change on disk once the new pair
	// is judged, and when a pair judged again is swapped in: rejected is
	// nil when the files' pair is served from now on, else why it is not
	// (as told to OnError). Set it and call it as OnError.
	OnChange func(rejected error)
	// now is the clock pairs are judged by; time.Now but in tests.
	now func() time.Time

	mu sync.Mutex
	// cert is the pair served: the last that could serve.
	cert *tls.Certificate
	// certPEM and keyPEM are what the files held at the last change.
	certPEM, keyPEM []byte
	// rejected is why the files' pair is not served; nil when it is.
	rejected error
	// pending is the files' pair when it parses but was rejected for its
	// time or names, judged again at each read; nil otherwise.
	pending *tls.Certificate
	// names are the names a pair must cover (SetNames); none: those of
	// cert.
	names []string
	// generation counts the pairs swapped in: 1 is New's.
	generation uint64
}

// connKey is the context key of a connection's *served.
type connKey struct{}

// served is the generation of the pair a connection's handshake got; 0
// before it.
type served struct{ generation atomic.Uint64 }

// ConnContext is http.Server's: it gives each connection a place where
// its handshake records the pair it got, for Stale.
func (w *Watcher) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, new(served))
}

// Stale reads the files again and reports whether the connection whose
// context (or a request's) is ctx was handshaken with an older pair than
// the current one. It is false for a connection without ConnContext's
// value.
func (w *Watcher) Stale(ctx context.Context) bool {
	conn, ok := ctx.Value(connKey{}).(*served)
	if !ok {
		return false
	}
	_, current := w.current()
	return conn.generation.Load() < current
}

// New loads the pair once, and fails if it does not load. It does not
// judge its time or names: a server may start with an expired pair
// (Status shows it) and take the next good one.
func New(certFile, keyFile string) (*Watcher, error) {
	w := &Watcher{certFile: certFile, keyFile: keyFile, now: time.Now}
	certPEM, keyPEM, err := w.read()
	if err != nil {
		return nil, err
	}
	cert, err := keyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s: %w",
			certFile, keyFile, err)
	}
	w.cert = cert
	w.certPEM = certPEM
	w.keyPEM = keyPEM
	w.generation = 1
	return w, nil
}

// SetNames sets the names (DNS names or IP addresses) a pair must cover
// to be swapped in: those the server is reached by, e.g. its Service's
// "name.namespace.svc". With none (the default), a new pair must cover
// every name of the pair served.
func (w *Watcher) SetNames(names ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names = slices.Clone(names)
}

// Status reads the files again, as a handshake does, and returns the
// certificate served and why the files' pair is not (nil when it is).
func (w *Watcher) Status() (served *x509.Certificate, rejected error) {
	w.current()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cert.Leaf, w.rejected
}

// GetCertificate is tls.Config's: the current pair, reloaded first if the
// files changed. It never fails once New has succeeded.
func (w *Watcher) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, generation := w.current()
	if hello == nil {
		return cert, nil
	}
	conn, ok := hello.Context().Value(connKey{}).(*served)
	if ok {
		conn.generation.Store(generation)
	}
	return cert, nil
}

// current is the current pair, reloaded first if the files changed, and
// its generation. A file that does not read (mid-rotation) changes
// nothing.
func (w *Watcher) current() (*tls.Certificate, uint64) {
	certPEM, keyPEM, err := w.read()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.loadLocked(certPEM, keyPEM)
	}
	return w.cert, w.generation
}

// loadLocked judges the pair read if the files changed, or the pending
// pair again, swaps in one that can serve, and tells OnError and
// OnChange of each change.
func (w *Watcher) loadLocked(certPEM, keyPEM []byte) {
	changed := !bytes.Equal(certPEM, w.certPEM) || !bytes.Equal(keyPEM, w.keyPEM)
	if changed {
		w.certPEM = certPEM
		w.keyPEM = keyPEM
		w.pending = nil
		cert, err := keyPair(certPEM, keyPEM)
		if err != nil {
			w.rejectLocked(err)
			return
		}
		w.pending = cert
	}
	if w.pending == nil {
		return
	}
	err := w.usableLocked(w.pending)
	switch {
	case err == nil:
		w.swapLocked()
	case changed:
		w.rejectLocked(err)
	}
}

// swapLocked makes the pending pair the one served.
func (w *Watcher) swapLocked() {
	w.cert = w.pending
	w.generation++
	w.pending = nil
	w.rejected = nil
	if w.OnChange != nil {
		w.OnChange(nil)
	}
}

// rejectLocked records and tells why the files' pair is not served.
func (w *Watcher) rejectLocked(err error) {
	w.rejected = fmt.Errorf("the TLS certificate %s and key %s are not served "+
		"(the previous pair still is): %w", w.certFile, w.keyFile, err)
	if w.OnError != nil {
		w.OnError(w.rejected)
	}
	if w.OnChange != nil {
		w.OnChange(w.rejected)
	}
}

// keyPair parses a pair, with its Leaf set.
func keyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil {
		cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0])
	}
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// usableLocked returns why cert cannot serve now, or nil: it must be
// valid now and cover the names (w.names, or those of the pair served).
func (w *Watcher) usableLocked(cert *tls.Certificate) error {
	leaf := cert.Leaf
	now := w.now()
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("the certificate is not valid before %s",
			leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("the certificate expired at %s",
			leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	names := w.names
	if len(names) == 0 {
		names = Names(w.cert.Leaf)
	}
	for _, name := range names {
		if !covers(leaf, name) {
			return fmt.Errorf("the certificate is for %s, not %s "+
				"(a name the server is reached by)",
				strings.Join(Names(leaf), ", "), name)
		}
	}
	return nil
}

// Names are a certificate's DNS names and IP addresses (clients ignore
// its common name).
func Names(leaf *x509.Certificate) []string {
	names := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// covers reports whether a client reaching the server by name accepts
// leaf; a wildcard name is covered by the same wildcard.
func covers(leaf *x509.Certificate, name string) bool {
	if leaf.VerifyHostname(name) == nil {
		return true
	}
	return slices.Contains(leaf.DNSNames, name)
}

// read reads both files.
func (w *Watcher) read() (certPEM, keyPEM []byte, err error) {
	certPEM, err = os.ReadFile(w.certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("the TLS certificate: %w", err)
	}
	keyPEM, err = os.ReadFile(w.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("the TLS key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// Package certwatch serves a TLS certificate and key read from files and
// reloaded when they change on disk, for servers that must not restart
// when cert-manager (or a kubelet updating a mounted Secret) rotates them:
//
//	w, err := certwatch.New("/certs/tls.crt", "/certs/tls.key")
//	cfg := &tls.Config{GetCertificate: w.GetCertificate}
//
// Each TLS handshake, and each Stale call, reads both files (a few
// kilobytes; modification times are too coarse to tell two quick writes
// apart) and parses them again when either changed. A pair
// that does not load (a rotation caught half-written, with a key that does
// not match its certificate yet) is not used: the last good pair goes on
// serving, the error is reported once to Watcher.OnError, and the next
// handshake tries again. Connections open at a rotation keep their
// certificate; requests in flight are never dropped. A server that asks
// Stale for each request, and closes a connection after answering when
// it is, makes each client's next call after the rotation handshake anew,
// with the new pair:
//
//	srv.ConnContext = w.ConnContext
//	// in the handler:
//	if w.Stale(r.Context()) { rw.Header().Set("Connection", "close") }
package certwatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
)

// Watcher holds the current certificate. Make it with New; it is safe for
// concurrent use.
type Watcher struct {
	certFile, keyFile string
	// OnError, if set, is told of a pair that failed to load, once per
	// change on disk. Set it before the first handshake.
	OnError func(error)

	mu sync.Mutex
	// cert is the last pair that loaded; certPEM and keyPEM are what the
	// files held when cert, or the last pair that failed, was read.
	cert            *tls.Certificate
	certPEM, keyPEM []byte
	// generation counts the pairs loaded: 1 is New's.
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

// New loads the pair once, and fails if it does not load.
func New(certFile, keyFile string) (*Watcher, error) {
	w := &Watcher{certFile: certFile, keyFile: keyFile}
	certPEM, keyPEM, err := w.read()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s: %w",
			certFile, keyFile, err)
	}
	w.cert = &cert
	w.certPEM = certPEM
	w.keyPEM = keyPEM
	w.generation = 1
	return w, nil
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
// its generation. OnError is called without w.mu held.
func (w *Watcher) current() (*tls.Certificate, uint64) {
	certPEM, keyPEM, err := w.read()
	if err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.cert, w.generation
	}
	cert, generation, err := w.load(certPEM, keyPEM)
	if err != nil && w.OnError != nil {
		w.OnError(fmt.Errorf("reloading the TLS certificate %s and key %s "+
			"(still serving the previous one): %w",
			w.certFile, w.keyFile, err))
	}
	return cert, generation
}

// load makes the pair read the current one if it changed and parses; it
// returns the current pair, its generation, and the error of a pair that
// changed and does not parse.
func (w *Watcher) load(certPEM, keyPEM []byte) (*tls.Certificate, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	same := bytes.Equal(certPEM, w.certPEM) && bytes.Equal(keyPEM, w.keyPEM)
	if same {
		return w.cert, w.generation, nil
	}
	w.certPEM = certPEM
	w.keyPEM = keyPEM
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return w.cert, w.generation, err
	}
	w.cert = &cert
	w.generation++
	return w.cert, w.generation, nil
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

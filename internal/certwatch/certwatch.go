// Package certwatch serves a TLS certificate and key read from files and
// reloaded when they change on disk, for servers that must not restart
// when cert-manager (or a kubelet updating a mounted Secret) rotates them:
//
//	w, err := certwatch.New("/certs/tls.crt", "/certs/tls.key")
//	cfg := &tls.Config{GetCertificate: w.GetCertificate}
//
// Each TLS handshake reads both files (a few kilobytes, far less than the
// handshake costs; modification times are too coarse to tell two quick
// writes apart) and parses them again when either changed. A pair
// that does not load (a rotation caught half-written, with a key that does
// not match its certificate yet) is not used: the last good pair goes on
// serving, the error is reported once to Watcher.OnError, and the next
// handshake tries again. Connections open at a rotation keep their
// certificate; requests in flight are never dropped.
package certwatch

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
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
	return w, nil
}

// GetCertificate is tls.Config's: the current pair, reloaded first if the
// files changed. It never fails once New has succeeded.
func (w *Watcher) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPEM, keyPEM, err := w.read()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return w.cert, nil
	}
	same := bytes.Equal(certPEM, w.certPEM) && bytes.Equal(keyPEM, w.keyPEM)
	if same {
		return w.cert, nil
	}
	w.certPEM = certPEM
	w.keyPEM = keyPEM
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if w.OnError != nil {
			w.OnError(fmt.Errorf("reloading the TLS certificate %s and key %s "+
				"(still serving the previous one): %w",
				w.certFile, w.keyFile, err))
		}
		return w.cert, nil
	}
	w.cert = &cert
	return w.cert, nil
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

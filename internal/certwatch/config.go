package certwatch

import (
	"crypto/tls"
	"fmt"
	"path/filepath"

	"github.com/kctl-dev/kctl/internal/certs"
)

// ServerConfig is the TLS configuration of a server whose certificate is
// dir/tls.crt with its key dir/tls.key, reloaded on change (onError hears
// of each pair it rejects), or, with dir "", a serving certificate for
// localhost of a CA of its own named name, made in memory, as for a
// program run on a laptop:
//
//	cfg, err := certwatch.ServerConfig(certDir, "kctl metrics (self-signed)", logIt)
func ServerConfig(dir, name string, onError func(error)) (*tls.Config, error) {
	cfg := &tls.Config{}
	if dir != "" {
		w, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("%w; pass the directory that holds it, or \"\" for a self-signed certificate", err)
		}
		w.OnError = onError
		cfg.GetCertificate = w.GetCertificate
		return cfg, nil
	}
	ca, err := certs.NewCA(name)
	if err != nil {
		return nil, fmt.Errorf("making a self-signed certificate: %w", err)
	}
	certPEM, keyPEM, _, err := ca.Serving("localhost", "127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("making a self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("making a self-signed certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

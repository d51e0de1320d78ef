package certwatch

import (
	"crypto/x509"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/certs"
)

// ServerConfig serves dir's pair (from the watcher, so a rotation is
// taken), refuses a dir without one saying what to pass, and with dir ""
// makes a pair for localhost of a CA named as asked.
func TestServerConfig_DirPairOrSelfSigned(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	sn, err := ca.WriteServing(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerConfig(dir, "unused", nil)
	if err != nil || cfg.GetCertificate == nil {
		t.Fatalf("ServerConfig(dir with a pair) = %v, %v; want a config with GetCertificate", cfg, err)
	}
	pair, err := cfg.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if leaf.SerialNumber.Cmp(sn) != 0 {
		t.Errorf("served serial %v, want dir's %v", leaf.SerialNumber, sn)
	}

	_, err = ServerConfig(t.TempDir(), "unused", nil)
	if err == nil || !strings.Contains(err.Error(), "tls.crt") || !strings.Contains(err.Error(), `or "" for a self-signed certificate`) {
		t.Errorf("ServerConfig(empty dir) = %v, want an error naming tls.crt and what to pass", err)
	}

	cfg, err = ServerConfig("", "kctl test (self-signed)", nil)
	if err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("ServerConfig(\"\") = %v, %v; want one self-signed pair", cfg, err)
	}
	leaf, _ = x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if leaf.VerifyHostname("localhost") != nil || leaf.Issuer.CommonName != "kctl test (self-signed)" {
		t.Errorf("self-signed pair for %v issued by %q, want localhost by the CA named as asked", leaf.DNSNames, leaf.Issuer.CommonName)
	}
}

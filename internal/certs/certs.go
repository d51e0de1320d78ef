// Package certs makes a certificate authority and serving certificates,
// without cert-manager: for tests and local runs of webhooks, and for a
// metrics server given no certificate (a self-signed one, as
// controller-runtime makes):
//
//	ca, err := certs.NewCA("kctl test CA")
//	err = ca.WriteServing(dir, "127.0.0.1", "localhost") // dir/tls.crt, dir/tls.key
//	caBundle := ca.PEM() // the webhook configuration's caBundle
//
// Keys are ECDSA P-256; certificates are valid from an hour ago for a year.
// The CA's key lives only in memory, so its certificates cannot be
// renewed: in production, use cert-manager or your own CA.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority. Make it with NewCA.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a self-signed CA named name, valid for a year.
func NewCA(name string) (*CA, error) {
	return NewCAUntil(name, time.Now().AddDate(1, 0, 0))
}

// NewCAUntil makes a self-signed CA named name, valid until notAfter.
func NewCAUntil(name string, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	block := &pem.Block{Type: "CERTIFICATE", Bytes: der}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(block)}, nil
}

// PEM is the CA's certificate, PEM-encoded: a caBundle.
func (ca *CA) PEM() []byte { return ca.pem }

// NotAfter is when the CA's certificate expires.
func (ca *CA) NotAfter() time.Time { return ca.cert.NotAfter }

// KeyPEM is the CA's private key, PEM-encoded (PKCS #8), for LoadCA.
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// LoadCA is the CA of a PEM-encoded certificate and key (PEM and KeyPEM),
// e.g. kept in a Secret, to issue more certificates.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, fmt.Errorf("certs: the CA's certificate or key is not PEM")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: the CA's certificate: %w", err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: the CA's key: %w", err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("certs: the CA's key is not the key of its certificate")
	}
	return &CA{cert: cert, key: key, pem: certPEM}, nil
}

// Serving issues a serving certificate for hosts (IP addresses or DNS
// names) and returns it and its key, PEM-encoded, and its serial number.
func (ca *CA) Serving(hosts ...string) (certPEM, keyPEM []byte, sn *big.Int, err error) {
	notBefore := time.Now().Add(-time.Hour)
	notAfter := time.Now().AddDate(1, 0, 0)
	return ca.ServingBetween(notBefore, notAfter, hosts...)
}

// ServingBetween is Serving for a certificate valid from notBefore to
// notAfter, e.g. one expired or not valid yet, for tests.
func (ca *CA) ServingBetween(notBefore, notAfter time.Time, hosts ...string) (certPEM, keyPEM []byte, sn *big.Int, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	sn = serial()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		ip := net.ParseIP(h)
		if ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, sn, nil
}

// WriteServing issues a serving certificate for hosts and writes it to
// dir/tls.crt and its key to dir/tls.key (mode 0600), each by a rename, so
// a reader never sees half a file. It returns the serial number.
func (ca *CA) WriteServing(dir string, hosts ...string) (*big.Int, error) {
	certPEM, keyPEM, sn, err := ca.Serving(hosts...)
	if err != nil {
		return nil, err
	}
	err = WritePair(dir, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return sn, nil
}

// WritePair writes certPEM to dir/tls.crt and keyPEM to dir/tls.key
// (mode 0600), the key first, each by a rename, so a reader never sees
// half a file.
func WritePair(dir string, certPEM, keyPEM []byte) error {
	err := writeFile(filepath.Join(dir, "tls.key"), keyPEM)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "tls.crt"), certPEM)
}

// writeFile writes data to path through a temporary file and a rename.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, data, 0o600)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return os.Rename(tmp, path)
}

// serial is a random 128-bit serial number.
func serial() *big.Int {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	n, _ := rand.Int(rand.Reader, limit)
	return n
}

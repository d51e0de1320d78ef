package certwatch

import (
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/kctl-dev/kctl/internal/testcerts"
)

func serialOf(t *testing.T, w *Watcher) *big.Int {
	t.Helper()
	c, err := w.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

func TestWatcher_ReloadsOnChange_KeepsLastGoodPair(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.WriteServing(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	w.OnError = func(err error) { errs = append(errs, err) }
	if got := serialOf(t, w); got.Cmp(first) != 0 {
		t.Fatalf("serial %v, want %v", got, first)
	}
	second, err := ca.WriteServing(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, w); got.Cmp(second) != 0 {
		t.Fatalf("after rotation: serial %v, want the new %v", got, second)
	}
	// A key that does not match (a rotation caught half-written).
	_, otherKey, _, err := ca.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := serialOf(t, w); got.Cmp(second) != 0 {
			t.Fatalf("with a mismatched key: serial %v, want the last good %v", got, second)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("OnError called %d times for one bad change, want 1: %v", len(errs), errs)
	}
	third, err := ca.WriteServing(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, w); got.Cmp(third) != 0 {
		t.Fatalf("after the rotation completed: serial %v, want %v", got, third)
	}
}

func TestNew_FailsOnMissingFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err == nil {
		t.Fatal("New succeeded without files")
	}
}

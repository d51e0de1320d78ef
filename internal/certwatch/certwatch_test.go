package certwatch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"testing"

	"github.com/kctl-dev/kctl/internal/certs"
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
	ca, err := certs.NewCA("test")
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

// TestWatcher_Stale_ClosesConnectionsOfAnOlderPair serves over TLS on
// loopback as kctl's webhook server does: a request on a connection of an
// older pair is answered, then its connection closed, so the client's next
// request handshakes with the new pair.
func TestWatcher_Stale_ClosesConnectionsOfAnOlderPair(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test")
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
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if w.Stale(r.Context()) {
				rw.Header().Set("Connection", "close")
			}
		}),
		ConnContext: w.ConnContext,
		TLSConfig:   &tls.Config{GetCertificate: w.GetCertificate},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	url := "https://" + ln.Addr().String()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	get := func() (serial *big.Int, reused, closing bool) {
		var info httptrace.GotConnInfo
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { info = i }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", url, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("a request failed: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber, info.Reused, resp.Close
	}
	if sn, _, closing := get(); sn.Cmp(first) != 0 || closing {
		t.Fatalf("first request: serial %v closing %v, want %v and kept open", sn, closing, first)
	}
	second, err := ca.WriteServing(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if sn, reused, closing := get(); sn.Cmp(first) != 0 || !reused || !closing {
		t.Fatalf("on the old connection: serial %v reused %v closing %v, want %v, reused, closing", sn, reused, closing, first)
	}
	if sn, reused, closing := get(); sn.Cmp(second) != 0 || reused || closing {
		t.Fatalf("the next request: serial %v reused %v closing %v, want the new %v on a new connection kept open", sn, reused, closing, second)
	}
}

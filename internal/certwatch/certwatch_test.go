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
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// writePair writes a pair of ca for hosts, valid from notBefore to
// notAfter, to dir.
func writePair(t *testing.T, dir string, ca *certs.CA, notBefore, notAfter time.Time, hosts ...string) *big.Int {
	t.Helper()
	certPEM, keyPEM, sn, err := ca.ServingBetween(notBefore, notAfter, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WritePair(dir, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return sn
}

// Issue 33, item 2: a pair for the wrong name, an expired one and one not
// valid yet are not swapped in; each reason is told once per change on
// disk, and the last good pair goes on serving.
func TestWatcher_PairThatCannotServe_NotSwappedIn(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := writePair(t, dir, ca, now.Add(-time.Hour), now.Add(time.Hour), "127.0.0.1", "hooks.system.svc")
	w, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	w.OnError = func(err error) { errs = append(errs, err) }
	for i, tc := range []struct {
		name              string
		notBefore, notAft time.Time
		hosts             []string
		reason            string
	}{
		{"wrong name", now.Add(-time.Hour), now.Add(time.Hour), []string{"127.0.0.1", "other.system.svc"}, "is for other.system.svc, 127.0.0.1, not hooks.system.svc"},
		{"missing IP", now.Add(-time.Hour), now.Add(time.Hour), []string{"hooks.system.svc"}, "is for hooks.system.svc, not 127.0.0.1"},
		{"expired", now.Add(-2 * time.Hour), now.Add(-time.Hour), []string{"127.0.0.1", "hooks.system.svc"}, "expired at"},
		{"not valid yet", now.Add(time.Hour), now.Add(2 * time.Hour), []string{"127.0.0.1", "hooks.system.svc"}, "not valid before"},
	} {
		writePair(t, dir, ca, tc.notBefore, tc.notAft, tc.hosts...)
		for range 3 {
			if got := serialOf(t, w); got.Cmp(good) != 0 {
				t.Fatalf("%s: serial %v served, want the last good %v", tc.name, got, good)
			}
		}
		if len(errs) != i+1 {
			t.Fatalf("%s: OnError told %d times after %d bad changes, want once per change: %v", tc.name, len(errs), i+1, errs)
		}
		if msg := errs[i].Error(); !strings.Contains(msg, tc.reason) || !strings.Contains(msg, "tls.crt") {
			t.Errorf("%s: OnError told %q, want the file and %q", tc.name, msg, tc.reason)
		}
	}
	// A superset of the names is fine.
	next := writePair(t, dir, ca, now.Add(-time.Hour), now.Add(time.Hour), "127.0.0.1", "hooks.system.svc", "hooks")
	if got := serialOf(t, w); got.Cmp(next) != 0 {
		t.Fatalf("a good pair with one more name: serial %v served, want %v", got, next)
	}
}

// A pair not valid yet is swapped in once it is, without a change on
// disk; Status and OnChange tell what is served and why not.
func TestWatcher_PairNotValidYet_SwappedInOnceValid(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := writePair(t, dir, ca, now.Add(-time.Hour), now.Add(time.Hour), "127.0.0.1")
	w, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	w.now = func() time.Time { return time.Unix(0, clock.Load()) }
	var changes []error
	w.OnChange = func(rejected error) { changes = append(changes, rejected) }
	later := writePair(t, dir, ca, now.Add(time.Minute), now.Add(time.Hour), "127.0.0.1")
	served, rejected := w.Status()
	if served.SerialNumber.Cmp(good) != 0 || rejected == nil || !strings.Contains(rejected.Error(), "not valid before") {
		t.Fatalf("Status() = %v, %v; want %v and why the new pair is not served", served.SerialNumber, rejected, good)
	}
	if len(changes) != 1 || changes[0] == nil {
		t.Fatalf("OnChange told %v, want one rejection", changes)
	}
	clock.Store(now.Add(2 * time.Minute).UnixNano())
	if got := serialOf(t, w); got.Cmp(later) != 0 {
		t.Fatalf("once valid: serial %v served, want %v", got, later)
	}
	served, rejected = w.Status()
	if served.SerialNumber.Cmp(later) != 0 || rejected != nil {
		t.Fatalf("Status() = %v, %v; want %v, nil", served.SerialNumber, rejected, later)
	}
	if len(changes) != 2 || changes[1] != nil {
		t.Fatalf("OnChange told %v, want a rejection, then nil", changes)
	}
}

// SetNames: a pair must cover the names set, whatever the served pair's.
func TestWatcher_SetNames_PairMustCoverThem(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	writePair(t, dir, ca, now.Add(-time.Hour), now.Add(time.Hour), "127.0.0.1")
	w, err := New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	w.SetNames("hooks.system.svc")
	writePair(t, dir, ca, now.Add(-time.Hour), now.Add(time.Hour), "127.0.0.1")
	if _, rejected := w.Status(); rejected == nil || !strings.Contains(rejected.Error(), "not hooks.system.svc") {
		t.Fatalf("a pair without the name set: rejected = %v, want it naming hooks.system.svc", rejected)
	}
	want := writePair(t, dir, ca, now.Add(-time.Hour), now.Add(time.Hour), "hooks.system.svc")
	if served, rejected := w.Status(); served.SerialNumber.Cmp(want) != 0 || rejected != nil {
		t.Fatalf("a pair for the name set only: Status() = %v, %v; want %v, nil", served.SerialNumber, rejected, want)
	}
}

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	corev1 "k8s.io/api/core/v1"
)

// TestWebhooks_RealAPIServer_CertificateRotatedOnDisk: the serving
// certificate is replaced on disk mid-run. No request fails, one in flight
// at the rotation completes, and the API server's calls move to the new
// certificate within its open connections' next call (shown by rotating
// to one it does not trust, then back).
func TestWebhooks_RealAPIServer_CertificateRotatedOnDisk(t *testing.T) {
	f := newWebhookFixture(t)
	v := newHeldValidator(t)
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		if strings.HasPrefix(req.Name, "deny-") {
			return nil, fmt.Errorf("denied by name")
		}
		return v.validate(ctx, req)
	})
	f.start(t)
	w := webhookConfig{name: "rotate.kctl.dev", url: "https://" + f.addr + "/validate--v1-configmap",
		caBundle: f.ca.PEM(), ns: f.ns, resource: "configmaps", failurePolicy: "Fail", timeout: 10}
	defer applyWebhooks(t, f.cfg, "Validating", w.name, w)()
	untilDenied(t, f, f.ns)
	configmaps := "/api/v1/namespaces/" + f.ns + "/configmaps"
	create := func(name string) apiResponse {
		return testRequest(t, f.cfg, "POST", configmaps, fmt.Sprintf(`{"metadata":{"name":%q}}`, name))
	}
	// The held request's goroutine reports to the test through channels,
	// never through t (issue 37: its t.Fatalf left the test blocked).
	held := make(chan apiResponse, 1)
	heldErr := make(chan error, 1)
	go func() {
		r, err := tryRequest(t.Context(), f.cfg, "POST", configmaps, `{"metadata":{"name":"held-1"}}`)
		held <- r
		heldErr <- err
	}()
	select {
	case <-v.entered:
	case err := <-heldErr:
		r := <-held
		t.Fatalf("the request to hold was answered before reaching the function: %d %s %v", r.code, r.body, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the request to hold did not reach the function in 30s")
	}
	n := 0
	createMany := func(count int) {
		t.Helper()
		for range count {
			n++
			if r := create(fmt.Sprintf("cm-%d", n)); r.code != 201 {
				t.Fatalf("create cm-%d = %d %s, want 201: no request may fail across a rotation", n, r.code, r.body)
			}
		}
	}
	createMany(10)
	rotated, err := f.ca.WriteServing(f.certDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	createMany(10)
	v.releaseAll()
	if r, err := <-held, <-heldErr; err != nil || r.code != 201 {
		t.Fatalf("the request in flight at the rotation = %d %s %v, want 201", r.code, r.body, err)
	}
	createMany(10)
	if sn := servedSerial(t, f.addr, f.ca); sn.Cmp(rotated) != 0 {
		t.Fatalf("a new connection gets serial %v, want the rotated %v", sn, rotated)
	}

	// Rotate to a certificate of a CA the configuration does not trust:
	// the API server's calls must fail once its open connections have
	// each served one more call (at most 2 here, the held one's and the
	// others').
	other, err := certs.NewCA("untrusted")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.WriteServing(f.certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	failedAt := 0
	for i := 1; i <= 3 && failedAt == 0; i++ {
		r := create(fmt.Sprintf("untrusted-%d", i))
		if r.code != 201 {
			failedAt = i
			if msg := r.status(t).Message; !strings.Contains(msg, "x509") && !strings.Contains(msg, "certificate") {
				t.Errorf("call %d with an untrusted certificate failed with %q, want a certificate error", i, msg)
			}
		}
	}
	if failedAt == 0 {
		t.Fatal("3 calls after a rotation to an untrusted certificate all succeeded: the API server still uses the old one")
	}
	if _, err := f.ca.WriteServing(f.certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if r := create("trusted-again"); r.code != 201 {
		t.Fatalf("the first call after rotating back to a trusted certificate = %d %s, want 201", r.code, r.body)
	}
}

// TestWebhooks_BadReviews_Get4xx: what is not a review is refused with a
// 4xx saying why, and counted; a review of 10 MiB is refused unread.
func TestWebhooks_BadReviews_Get4xx(t *testing.T) {
	f := newWebhookFixture(t)
	Validate(f.hooks, func(context.Context, AdmissionRequest[corev1.ConfigMap]) ([]string, error) { return nil, nil })
	Convert(f.hooks, func(*sprocket, *sprocketV2) error { return nil }, func(*sprocketV2, *sprocket) error { return nil })
	f.start(t)
	client := webhookClient(f.ca)
	big := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":{"data":"` + strings.Repeat("x", 10<<20) + `"}}}`
	for _, tc := range []struct {
		name, method, path, contentType, body string
		code                                  int
		message                               string
	}{
		{"GET", "GET", "/validate--v1-configmap", "", "", 405, "is POSTed"},
		{"not JSON", "POST", "/validate--v1-configmap", "text/plain", "{}", 415, "application/json"},
		{"malformed", "POST", "/validate--v1-configmap", "application/json", `{"apiVersion":`, 400, "does not decode"},
		{"v1beta1", "POST", "/validate--v1-configmap", "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`, 400, `admissionReviewVersions: ["v1"]`},
		{"no request", "POST", "/validate--v1-configmap", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "no request"},
		{"10 MiB", "POST", "/validate--v1-configmap", "application/json", big, 413, "longer than"},
		{"conversion v1beta1", "POST", "/convert", "application/json", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"1"}}`, 400, `conversionReviewVersions: ["v1"]`},
		{"conversion malformed", "POST", "/convert", "application/json", `[`, 400, "does not decode"},
		{"unknown path", "POST", "/validate--v1-secret", "application/json", "{}", 404, ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, "https://"+f.addr+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body[:n]), tc.message) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.name, resp.StatusCode, body[:n], tc.code, tc.message)
		}
	}
	page := f.page()
	for _, want := range []string{
		`controller_runtime_webhook_requests_total{code="413",webhook="/validate--v1-configmap"} 1`,
		`controller_runtime_webhook_requests_total{code="400",webhook="/convert"} 2`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the metrics page lacks %s", want)
		}
	}
}

// TestWebhooks_TLS12AndUp_CertificateRequired: Serve fails without a
// certificate, naming it, and a second time on one Manager; the server
// refuses TLS 1.1 and speaks 1.2 and HTTP/1.1.
func TestWebhooks_TLS12AndUp_CertificateRequired(t *testing.T) {
	f := newWebhookFixture(t)
	if _, err := Serve(f.mgr, freeLoopbackAddr(t), t.TempDir()); err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("Serve without a certificate = %v, want an error naming tls.crt", err)
	}
	if _, err := Serve(f.mgr, freeLoopbackAddr(t), f.certDir); err == nil || !strings.Contains(err.Error(), "one server") {
		t.Errorf("a second Serve on one Manager = %v, want an error saying one server serves them all", err)
	}
	f.start(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca.PEM())
	eventually(t, "the webhook server listening", func() bool {
		c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: pool})
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil || !strings.Contains(err.Error(), "protocol version") {
		if c != nil {
			c.Close()
		}
		t.Errorf("a TLS 1.1 handshake: %v, want the server to refuse its protocol version", err)
	}
	c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("a TLS 1.2 handshake: %v", err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("negotiated %q, want HTTP/1.1 only", p)
	}
}

// TestWebhooks_ServingLine_NamesTimeoutsAndBound: the server logs, as it
// starts, its read and write timeouts and its bound on requests in flight.
func TestWebhooks_ServingLine_NamesTimeoutsAndBound(t *testing.T) {
	ca, err := certs.NewCA("kctl webhook test")
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	if _, err := ca.WriteServing(certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	mgr := testManager(t, noServer(), "default", kctl.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if _, err := Serve(mgr, freeLoopbackAddr(t), certDir); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	line := logs.LinesEventually(t, `msg="serving webhooks"`, 1)[0]
	if !strings.Contains(line, "tls=true readTimeout=30s writeTimeout=40s maxInFlight=16") {
		t.Errorf("the webhook server's serving line = %s, want TLS, its timeouts and its bound", line)
	}
}

package webhook

// Issue 33, item 2: a certificate pair is swapped in only if it can serve.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	"github.com/kctl-dev/kctl/internal/servetest"
	corev1 "k8s.io/api/core/v1"
)

// TestWebhooks_RealAPIServer_CertificateThatCannotServe_KeptOut: a pair
// for the wrong name, an expired one and one not valid yet, each written
// to the certificate directory mid-run, are not served: every admission
// through the real API server goes on succeeding with the last good pair;
// each reason is logged once per change of the files, shown on
// /readyz?verbose (which stays 200) and by the gauge
// kctl_webhook_certificate_rejected. A good pair is then swapped in.
func TestWebhooks_RealAPIServer_CertificateThatCannotServe_KeptOut(t *testing.T) {
	logs := &logBuffer{}
	f := &webhookFixture{cfg: testConfig(t), addr: freeLoopbackAddr(t), certDir: t.TempDir()}
	f.ns = testNamespace(t, f.cfg)
	var err error
	if f.ca, err = certs.NewCA("kctl webhook test"); err != nil {
		t.Fatal(err)
	}
	good, err := f.ca.WriteServing(f.certDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	f.mgr = testManager(t, f.cfg, f.ns, kctl.Options{Logger: logger})
	f.page = metricsPage(t, f.mgr)
	if f.hooks, err = Serve(f.mgr, f.addr, f.certDir); err != nil {
		t.Fatal(err)
	}
	healthAddr := freeLoopbackAddr(t)
	if err := f.mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	Validate(f.hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		if strings.HasPrefix(req.Name, "deny-") {
			return nil, fmt.Errorf("denied by name")
		}
		return nil, nil
	})
	f.start(t)
	w := webhookConfig{name: "badpair.kctl.dev", url: "https://" + f.addr + "/validate--v1-configmap",
		caBundle: f.ca.PEM(), ns: f.ns, resource: "configmaps", failurePolicy: "Fail", timeout: 10}
	defer applyWebhooks(t, f.cfg, "Validating", w.name, w)()
	untilDenied(t, f, f.ns)
	n := 0
	createMany := func(what string) {
		t.Helper()
		for range 3 {
			n++
			r, err := tryRequest(t.Context(), f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"cm-%d"}}`, n))
			if err != nil || r.code != 201 {
				t.Fatalf("with %s on disk: create cm-%d = %d %s %v, want 201: the last good pair must go on serving", what, n, r.code, r.body, err)
			}
		}
	}
	gauge := func() string {
		page := f.page()
		for _, l := range strings.Split(page, "\n") {
			if strings.HasPrefix(l, "kctl_webhook_certificate_rejected ") {
				return strings.TrimPrefix(l, "kctl_webhook_certificate_rejected ")
			}
		}
		return "absent"
	}
	now := time.Now()
	for _, tc := range []struct {
		name                string
		notBefore, notAfter time.Time
		hosts               []string
		reason              string
	}{
		{"a pair for the wrong name", now.Add(-time.Hour), now.Add(time.Hour), []string{"localhost"}, "is for localhost, not 127.0.0.1"},
		{"an expired pair", now.Add(-2 * time.Hour), now.Add(-time.Hour), []string{"127.0.0.1"}, "expired at"},
		{"a pair not valid yet", now.Add(time.Hour), now.Add(2 * time.Hour), []string{"127.0.0.1"}, "not valid before"},
	} {
		certPEM, keyPEM, _, err := f.ca.ServingBetween(tc.notBefore, tc.notAfter, tc.hosts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := certs.WritePair(f.certDir, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		createMany(tc.name)
		if sn := servedSerial(t, f.addr, f.ca); sn.Cmp(good) != 0 {
			t.Errorf("with %s on disk: a new connection gets serial %v, want the last good %v", tc.name, sn, good)
		}
		createMany(tc.name)
		if lines := logs.Lines(tc.reason); len(lines) != 1 || !strings.Contains(lines[0], "tls.crt") {
			t.Errorf("with %s on disk: %d log lines name %q, want 1 naming the file: %q", tc.name, len(lines), tc.reason, lines)
		}
		code, body := servetest.Get(t, healthAddr, "", "/readyz?verbose")
		if code != 200 || !strings.Contains(body, "[+]webhook-certificate ok") || !strings.Contains(body, tc.reason) {
			t.Errorf("with %s on disk: /readyz?verbose = %d %q, want 200 with webhook-certificate ok naming %q", tc.name, code, body, tc.reason)
		}
		if g := gauge(); g != "1" {
			t.Errorf("with %s on disk: kctl_webhook_certificate_rejected = %s, want 1", tc.name, g)
		}
	}
	rotated, err := f.ca.WriteServing(f.certDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	createMany("a good pair")
	if sn := servedSerial(t, f.addr, f.ca); sn.Cmp(rotated) != 0 {
		t.Errorf("with a good pair on disk: a new connection gets serial %v, want the new %v", sn, rotated)
	}
	if g := gauge(); g != "0" {
		t.Errorf("with a good pair on disk: kctl_webhook_certificate_rejected = %s, want 0", g)
	}
	if code, body := servetest.Get(t, healthAddr, "", "/readyz?verbose"); code != 200 || strings.Contains(body, "not served") {
		t.Errorf("with a good pair on disk: /readyz?verbose = %d %q, want 200 without a rejected pair", code, body)
	}
}

// TestWebhooks_ServedCertificateExpired_NotReady: a server whose only
// pair has expired (every call of the API server would fail) is not
// ready, and /readyz?verbose says why; a good pair on disk makes it
// ready again.
func TestWebhooks_ServedCertificateExpired_NotReady(t *testing.T) {
	ca, err := certs.NewCA("kctl webhook test")
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	certPEM, keyPEM, _, err := ca.ServingBetween(time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WritePair(certDir, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	mgr := testManager(t, noServer(), "default", kctl.Options{})
	if _, err := Serve(mgr, freeLoopbackAddr(t), certDir); err != nil {
		t.Fatalf("Serve with an expired pair: %v, want it to start (a good pair may come)", err)
	}
	healthAddr := freeLoopbackAddr(t)
	if err := mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	readyz := func() (int, string) {
		return servetest.Get(t, healthAddr, "", "/readyz/webhook-certificate?verbose")
	}
	servetest.PollPage(t, healthAddr, "/healthz", "the health server", func(code int, _ string) bool { return code == 200 })
	if code, body := readyz(); code != 503 || !strings.Contains(body, "valid from") {
		t.Errorf("with an expired pair served: /readyz/webhook-certificate?verbose = %d %q, want 503 saying when it was valid", code, body)
	}
	if _, err := ca.WriteServing(certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(); code != 200 {
		t.Errorf("with a good pair on disk: /readyz/webhook-certificate?verbose = %d %q, want 200", code, body)
	}
}

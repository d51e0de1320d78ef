package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"log/slog"
	"math/big"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// servedBy dials the server at addr as a TLS client trusting the PEM
// bundle and returns the serial of the certificate it serves; nil if the
// handshake fails (say, a certificate of a CA not in the bundle).
func servedBy(addr string, bundle []byte) *big.Int {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		return nil
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// Issue 35, item 2: three replicas started at once agree on one pair: one
// made the Secret, the others read it, and none replaced it.
func TestServeWithCertificates_ThreeReplicas_ServeOnePair(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mutating := "kctl-certs-" + ns
	remove := applyWebhooks(t, cfg, "Mutating", mutating, webhookConfig{name: "cm.webhook.kctl.dev",
		url: "https://127.0.0.1:1/mutate--v1-configmap", ns: ns, resource: "configmaps", failurePolicy: "Ignore", timeout: 1})
	defer remove()
	defer testCRDAbsent(t, cfg, ns, "certs.kctl.dev", "v1", "wheels")()
	wheels := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"wheels.certs.kctl.dev"},
 "spec":{"group":"certs.kctl.dev","scope":"Namespaced",
  "names":{"plural":"wheels","singular":"wheel","kind":"Wheel","listKind":"WheelList"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}],
  "conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"url":"https://127.0.0.1:1/convert"}}}}}`
	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", wheels); code != 201 {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	certsOf := Certificates{Secret: ns + "/webhook-certs", Names: []string{"127.0.0.1"}, Validity: time.Hour,
		MutatingWebhooks: []string{mutating}, CRDs: []string{"wheels.certs.kctl.dev"}}
	var addrs []string
	var logs []*logBuffer
	for range 3 {
		log := &logBuffer{}
		mgr := testManager(t, cfg, ns, kctl.Options{Logger: slog.New(slog.NewTextHandler(io.MultiWriter(log, t.Output()), nil))})
		addr := freeLoopbackAddr(t)
		if _, err := ServeWithCertificates(mgr, addr, certsOf); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
		logs = append(logs, log)
		startManager(t, mgr)
	}
	secrets := kctl.NewClient[corev1.Secret](mustConn(t, cfg))
	var sec *corev1.Secret
	eventually(t, "the Secret made", func() bool {
		var err error
		sec, err = secrets.Get(t.Context(), ns, "webhook-certs")
		return err == nil
	})
	want, err := parseCert(sec.Data[secretCert])
	if err != nil {
		t.Fatal(err)
	}
	for i, addr := range addrs {
		eventually(t, "replica "+addr+" serving the Secret's pair", func() bool {
			sn := servedBy(addr, sec.Data[secretBundle])
			return sn != nil && sn.Cmp(want.SerialNumber) == 0
		})
		logs[i].LinesEventually(t, "serving a new pair", 1)
		if n := len(logs[i].Lines("serving a new pair")); n != 1 {
			t.Errorf("replica %d served %d pairs, want 1: no replica replaces another's", i, n)
		}
	}
	conn := mustConn(t, cfg)
	eventually(t, "the caBundles of the webhook configuration and the CRD set to the Secret's CAs", func() bool {
		hooks, err1 := kctl.NewClient[mutatingConfiguration](conn).Get(t.Context(), "", mutating)
		crd, err2 := kctl.NewClient[crdConversion](conn).Get(t.Context(), "", "wheels.certs.kctl.dev")
		return err1 == nil && err2 == nil && len(hooks.Webhooks) == 1 &&
			bytes.Equal(hooks.Webhooks[0].ClientConfig.CABundle, sec.Data[secretBundle]) &&
			bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, sec.Data[secretBundle])
	})
	again, err := secrets.Get(t.Context(), ns, "webhook-certs")
	if err != nil || again.ResourceVersion != sec.ResourceVersion {
		t.Errorf("the Secret changed after it was made (resourceVersion %s, then %s, %v): a replica overwrote it", sec.ResourceVersion, again.ResourceVersion, err)
	}
}

// Issue 35, item 2: with a 6 s certificate life, the pair is renewed
// every 4 s and the CA once within 20 s, under a steady stream of
// admissions through the real API server, none of which fails.
func TestServeWithCertificates_RotationUnderTraffic_NoAdmissionFails(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	addr := freeLoopbackAddr(t)
	name := "kctl-rotation-" + ns
	remove := applyWebhooks(t, cfg, "Validating", name, webhookConfig{name: "cm.webhook.kctl.dev",
		url: "https://" + addr + "/validate--v1-configmap", ns: ns, resource: "configmaps", failurePolicy: "Fail", timeout: 10})
	defer remove()
	mgr := testManager(t, cfg, ns, kctl.Options{})
	hooks, err := ServeWithCertificates(mgr, addr, Certificates{Secret: ns + "/webhook-certs", Names: []string{"127.0.0.1"},
		ValidatingWebhooks: []string{name}, Validity: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	Validate(hooks, func(ctx context.Context, req AdmissionRequest[corev1.ConfigMap]) ([]string, error) {
		calls.Add(1)
		return nil, nil
	})
	startManager(t, mgr)
	conn := mustConn(t, cfg)
	cms := kctl.NewClient[corev1.ConfigMap](conn)
	secrets := kctl.NewClient[corev1.Secret](conn)
	n := 0
	create := func() error {
		n++
		return cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c" + big.NewInt(int64(n)).String()}})
	}
	eventually(t, "a first admission through the webhook", func() bool { return create() == nil && calls.Load() > 0 })

	pairs := map[string]bool{}
	signers := map[string]bool{}
	failed := 0
	made := 0
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && (len(signers) < 2 || len(pairs) < 5) {
		if err := create(); err != nil {
			failed++
			t.Errorf("admission %d failed: %v", n, err)
		} else {
			made++
		}
		sec, err := secrets.Get(t.Context(), ns, "webhook-certs")
		if err == nil {
			pairs[string(sec.Data[secretCert])] = true
			signers[string(sec.Data[secretSignerCrt])] = true
		}
	}
	t.Logf("%d admissions while %d pairs and %d CAs were served, %d failed", made, len(pairs), len(signers), failed)
	if len(signers) < 2 || len(pairs) < 5 {
		t.Fatalf("in 60 s: %d CAs and %d pairs, want a CA renewed and 4 pairs renewed", len(signers), len(pairs))
	}
	if int64(made) > calls.Load() {
		t.Errorf("%d ConfigMaps made, %d webhook calls: an admission skipped the webhook", made, calls.Load())
	}
}

// Serve without a certificate directory, as on a laptop: a self-signed
// pair for 127.0.0.1, and a log line with the caBundle and the URL to
// point a webhook configuration at.
func TestServe_NoCertDir_SelfSignedAndSaysHowToPointAtIt(t *testing.T) {
	var log logBuffer
	mgr, err := kctl.NewManager(kctl.Options{Config: noServer(), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	if _, err := Serve(mgr, addr, ""); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(addr, ":")
	line := log.Lines("self-signed certificate for 127.0.0.1")
	if len(line) != 1 || !strings.Contains(line[0], "https://127.0.0.1:"+port+"/<path>") {
		t.Fatalf("the log does not say how to point a configuration at the server:\n%s", log.String())
	}
	m := regexp.MustCompile(`caBundle="?([A-Za-z0-9+/=]+)`).FindStringSubmatch(line[0])
	if m == nil {
		t.Fatalf("no caBundle in %q", line[0])
	}
	bundle, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the server serving a pair the logged caBundle verifies", func() bool {
		return servedBy(addr, bundle) != nil
	})
}

// mustConn is a connection with cfg.
func mustConn(t *testing.T, cfg *rest.Config) *kctl.Conn {
	t.Helper()
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// On fake time, a second at a time over four CA lives: the pair served is
// always valid, its CA is in the bundle, and a new CA signs a served pair
// only once it has been in the bundle for the settling time (a tenth of
// the validity, at least 2 s): the API server trusts a CA before it meets
// a pair of it.
func TestRotator_APairOfANewCAIsServedOnlyOnceItsCASettled(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	const validity = 30 * time.Second
	settle := 3 * time.Second
	r := newRotator(env.Conn, Certificates{Secret: ns + "/certs", Names: []string{"127.0.0.1"}, Validity: validity},
		ns, "certs", t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	secrets := kctl.NewClient[corev1.Secret](env.Conn)
	inBundleSince := map[string]time.Time{}   // CA key ID -> first seen in the bundle
	start := time.Now().Truncate(time.Second) // as a certificate's times are
	cas := map[string]bool{}
	for now := start; now.Before(start.Add(4 * 4 * validity)); now = now.Add(time.Second) {
		if err := r.sync(t.Context(), now); err != nil {
			t.Fatalf("sync at +%v: %v", now.Sub(start), err)
		}
		sec, err := secrets.Get(t.Context(), ns, "certs")
		if err != nil {
			t.Fatal(err)
		}
		for _, ca := range bundleCerts(sec.Data[secretBundle]) {
			if _, ok := inBundleSince[string(ca.SubjectKeyId)]; !ok {
				inBundleSince[string(ca.SubjectKeyId)] = now
			}
		}
		pair, err := parseCert(r.served)
		if err != nil {
			t.Fatal(err)
		}
		cas[string(pair.AuthorityKeyId)] = true
		since, trusted := inBundleSince[string(pair.AuthorityKeyId)]
		stillInBundle := false
		for _, ca := range bundleCerts(sec.Data[secretBundle]) {
			stillInBundle = stillInBundle || bytes.Equal(ca.SubjectKeyId, pair.AuthorityKeyId)
		}
		switch {
		case now.After(pair.NotAfter):
			t.Fatalf("at +%v the pair served expired at +%v", now.Sub(start), pair.NotAfter.Sub(start))
		case !trusted || !stillInBundle:
			t.Fatalf("at +%v the pair served is of a CA not in the bundle", now.Sub(start))
		case since.After(start) && now.Sub(since) < settle && bytes.Equal(r.served, sec.Data[secretCert]) && pairIssuedAfter(pair, since):
			t.Fatalf("at +%v a pair of a CA in the bundle only since +%v is served", now.Sub(start), since.Sub(start))
		}
	}
	if len(cas) < 3 {
		t.Errorf("over four CA lives, pairs of %d CAs were served, want at least 3", len(cas))
	}
}

// pairIssuedAfter reports whether pair was issued at t or later (its
// notBefore is a minute before its issue).
func pairIssuedAfter(pair *x509.Certificate, t time.Time) bool {
	return !pair.NotBefore.Add(time.Minute).Before(t)
}

// A deployment that changes the names the server is reached by gets a
// pair for the new names at the next check, from the same CA.
func TestRotator_NamesChanged_NewPairCoversThem(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := Certificates{Secret: ns + "/certs", Names: []string{"old.ns.svc"}, Validity: time.Hour}
	start := time.Now()
	if err := newRotator(env.Conn, c, ns, "certs", t.TempDir(), discard).sync(t.Context(), start); err != nil {
		t.Fatal(err)
	}
	c.Names = []string{"new.ns.svc"}
	r := newRotator(env.Conn, c, ns, "certs", t.TempDir(), discard)
	if err := r.sync(t.Context(), start.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	pair, err := parseCert(r.served)
	if err != nil || pair.VerifyHostname("new.ns.svc") != nil {
		t.Errorf("after the names changed, the pair served is for %v (%v), want new.ns.svc", pair.DNSNames, err)
	}
}

package webhook

// Certificates made by the program, without cert-manager: a CA and a
// serving pair kept in a Secret that every replica serves, renewed before
// they expire, and the CAs kept in the caBundle of the webhook
// configurations and CRDs that call the server.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Certificates asks ServeWithCertificates to make and renew the server's
// certificate itself:
//
//	hooks, err := webhook.ServeWithCertificates(mgr, ":9443", webhook.Certificates{
//		Secret:             "widgets-system/widgets-webhook-certs",
//		Names:              []string{"widgets-webhook.widgets-system.svc"},
//		ValidatingWebhooks: []string{"widgets"},
//		CRDs:               []string{"widgets.example.com"},
//	})
type Certificates struct {
	// Secret is "namespace/name" of the Secret that keeps the CAs and the
	// serving pair, made if missing. Every replica serves the pair in it.
	Secret string
	// Names are the DNS names or IP addresses the API server reaches the
	// server by, e.g. its Service's "name.namespace.svc"; at least one.
	Names []string
	// ValidatingWebhooks and MutatingWebhooks name webhook configurations
	// whose every webhook's clientConfig.caBundle is kept to the CAs in
	// the Secret; CRDs names CustomResourceDefinitions whose conversion
	// webhook's is.
	ValidatingWebhooks, MutatingWebhooks, CRDs []string
	// Validity is a serving certificate's life: 90 days if 0. A CA lives
	// four times as long. Each is replaced once a third of its life is left.
	Validity time.Duration
}

// The Secret's keys: the serving pair under the names of a kubernetes.io/tls
// Secret, the CAs to trust (newest first), and the CA that signs new pairs.
const (
	secretCert      = "tls.crt"
	secretKey       = "tls.key"
	secretBundle    = "ca.crt"
	secretSignerCrt = "ca-signer.crt"
	secretSignerKey = "ca-signer.key"
	// rotatedAt, an annotation, is when the signer was made: a pair it
	// signs is served only once its CA has been in the caBundles a while.
	rotatedAt = "webhook.kctl.dev/ca-rotated-at"
)

// ServeWithCertificates is Serve with a certificate the program makes and
// renews itself, as cert-manager would, kept in the Secret c names:
//
//   - The first replica to start makes a CA and a serving pair for
//     c.Names and creates the Secret; the others read it. Every change of
//     the Secret is an update at the resourceVersion read, so no replica
//     overwrites another's fresh pair: the loser of a Conflict reads the
//     winner's. Every replica serves the pair in the Secret.
//   - Every replica keeps the caBundle of c's webhook configurations and
//     CRDs to the CAs in the Secret (a JSON patch, only where it differs).
//   - A pair is renewed once a third of c.Validity is left. A CA is renewed
//     likewise: the new one joins the caBundles beside the old, and pairs
//     it signs are served only after a tenth of c.Validity (2 s to 5 min),
//     once the API server trusts it; the old CA leaves the caBundles when
//     it expires. No admission fails for a rotation.
//
// Each replica checks the Secret every twentieth of c.Validity (1 s to 1
// min). Until its first pair is served and the caBundles are set, the
// readiness check "webhook-certificate" fails. RBAC: get, create and update
// on the Secret; get and patch on the webhook configurations and CRDs.
func ServeWithCertificates(mgr *kctl.Manager, addr string, c Certificates) (*Server, error) {
	ns, name, ok := strings.Cut(c.Secret, "/")
	if !ok || ns == "" || name == "" || len(c.Names) == 0 {
		return nil, fmt.Errorf("kctl: webhook certificates: Secret %q and Names %q: give the Secret as namespace/name, and the names the API server reaches the server by", c.Secret, c.Names)
	}
	if c.Validity == 0 {
		c.Validity = 90 * 24 * time.Hour
	}
	if addr == "" {
		return Serve(mgr, "", "")
	}
	dir, err := os.MkdirTemp("", "kctl-webhook-certs-")
	if err != nil {
		return nil, err
	}
	srv, err := serveFrom(mgr, addr, dir, c, ns, name)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kctl: webhook certificates: %w", unprefixed(err))
	}
	return srv, nil
}

// serveFrom is ServeWithCertificates once dir is made: a placeholder pair
// in it until the Secret's is served (the readiness check fails till then),
// the server, and the rotator, which removes dir when it ends.
func serveFrom(mgr *kctl.Manager, addr, dir string, c Certificates, ns, name string) (*Server, error) {
	placeholder, err := certs.NewCA("kctl webhook placeholder")
	if err == nil {
		_, err = placeholder.WriteServing(dir, c.Names...)
	}
	if err != nil {
		return nil, err
	}
	srv, err := Serve(mgr, addr, dir)
	if err != nil {
		return nil, err
	}
	srv.CertificateNames(c.Names...)
	conn, err := kctl.NewConn(mgr.Config())
	if err != nil {
		return nil, err
	}
	r := newRotator(conn, c, ns, name, dir, mgr.Logger())
	mgr.AddReadyCheck("webhook-certificate-made", r.ready)
	err = mgr.Add(kctl.Runnable{Name: "webhook certificates", Run: r.run})
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// rotator keeps the Secret's CAs and pair, the served pair and the
// caBundles (see ServeWithCertificates).
type rotator struct {
	c             Certificates
	ns, name, dir string
	log           *slog.Logger
	secrets       *kctl.Client[corev1.Secret]
	validating    *kctl.Client[validatingConfiguration]
	mutating      *kctl.Client[mutatingConfiguration]
	crds          *kctl.Client[crdConversion]
	// served is the certificate written to dir; owned by run
	served []byte
	// lastErr is the last failure logged; owned by run
	lastErr string
	// synced: a pair of the Secret is served and the caBundles are set
	synced atomic.Bool
}

func newRotator(conn *kctl.Conn, c Certificates, ns, name, dir string, log *slog.Logger) *rotator {
	return &rotator{
		c: c, ns: ns, name: name, dir: dir,
		log:        log.With("secret", ns+"/"+name),
		secrets:    kctl.NewClient[corev1.Secret](conn),
		validating: kctl.NewClient[validatingConfiguration](conn),
		mutating:   kctl.NewClient[mutatingConfiguration](conn),
		crds:       kctl.NewClient[crdConversion](conn),
	}
}

func (r *rotator) ready(*http.Request) error {
	if !r.synced.Load() {
		return fmt.Errorf("the webhook certificate of Secret %s/%s is not served yet", r.ns, r.name)
	}
	return nil
}

// run syncs at once, then every twentieth of the validity, until ctx ends;
// then it removes dir.
func (r *rotator) run(ctx context.Context) error {
	defer os.RemoveAll(r.dir)
	every := min(max(r.c.Validity/20, time.Second), time.Minute)
	for {
		err := r.sync(ctx, time.Now())
		r.report(err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// report logs err if it differs from the last one, and a recovery.
func (r *rotator) report(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == r.lastErr:
	case err != nil:
		r.log.Error("kctl: webhook certificates: " + msg)
	default:
		r.log.Info("kctl: webhook certificates: in sync again")
	}
	r.lastErr = msg
}

// sync reads the Secret (making it if missing), renews what is due, serves
// its pair and sets the caBundles.
func (r *rotator) sync(ctx context.Context, now time.Time) error {
	sec, err := r.secrets.Get(ctx, r.ns, r.name)
	if apierrors.IsNotFound(err) {
		sec, err = r.create(ctx, now)
	}
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", r.ns, r.name, err)
	}
	sec, err = r.renew(ctx, sec, now)
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", r.ns, r.name, err)
	}
	if !bytes.Equal(sec.Data[secretCert], r.served) {
		err = certs.WritePair(r.dir, sec.Data[secretCert], sec.Data[secretKey])
		if err != nil {
			return err
		}
		r.served = sec.Data[secretCert]
		r.log.Info("kctl: webhook certificates: serving a new pair", "until", certNotAfter(sec.Data[secretCert]))
	}
	err = r.publish(ctx, sec.Data[secretBundle])
	if err != nil {
		return err
	}
	r.synced.Store(true)
	return nil
}

// create makes a CA and a pair and creates the Secret; if another replica
// made it first, it reads that one.
func (r *rotator) create(ctx context.Context, now time.Time) (*corev1.Secret, error) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{}}
	err := r.newSigner(sec, now)
	if err == nil {
		err = r.newPair(sec, now)
	}
	if err != nil {
		return nil, err
	}
	err = r.secrets.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		return r.secrets.Get(ctx, r.ns, r.name)
	}
	return sec, err
}

// renew changes in sec what is due at now and updates it at the
// resourceVersion read: a new signing CA, added to the bundle; a new pair
// from it once the CA has settled, or when a third of the pair's life is
// left or it does not cover the names; expired CAs out of the bundle. After a Conflict it returns the
// Secret another replica wrote.
func (r *rotator) renew(ctx context.Context, sec *corev1.Secret, now time.Time) (*corev1.Secret, error) {
	signer, err := certs.LoadCA(sec.Data[secretSignerCrt], sec.Data[secretSignerKey])
	if err != nil {
		return nil, fmt.Errorf("%w: not a Secret of ServeWithCertificates; delete it, and it is made anew", err)
	}
	changed := false
	if now.After(signer.NotAfter().Add(-4 * r.c.Validity / 3)) {
		err = r.newSigner(sec, now)
		changed = true
	}
	settled := now.Sub(rotationTime(sec)) >= min(max(r.c.Validity/10, 2*time.Second), 5*time.Minute)
	pair, _ := parseCert(sec.Data[secretCert])
	pairDue := pair == nil || now.After(pair.NotAfter.Add(-r.c.Validity/3)) || !covers(pair, r.c.Names)
	signedByOld := pair != nil && !bytes.Equal(pair.AuthorityKeyId, signerKeyID(sec))
	if err == nil && settled && (pairDue || signedByOld) {
		err = r.newPair(sec, now)
		changed = true
	}
	kept := validCerts(sec.Data[secretBundle], now)
	if !bytes.Equal(kept, sec.Data[secretBundle]) {
		sec.Data[secretBundle] = kept
		changed = true
	}
	if err != nil || !changed {
		return sec, err
	}
	err = r.secrets.Update(ctx, sec)
	if apierrors.IsConflict(err) {
		return r.secrets.Get(ctx, r.ns, r.name)
	}
	return sec, err
}

// newSigner makes a CA that signs the pairs from now on, first in the bundle.
func (r *rotator) newSigner(sec *corev1.Secret, now time.Time) error {
	name := fmt.Sprintf("kctl webhook CA %s/%s %s", r.ns, r.name, now.UTC().Format(time.RFC3339))
	ca, err := certs.NewCAUntil(name, now.Add(4*r.c.Validity))
	if err != nil {
		return err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	sec.Data[secretSignerCrt] = ca.PEM()
	sec.Data[secretSignerKey] = key
	sec.Data[secretBundle] = append(bytes.Clone(ca.PEM()), sec.Data[secretBundle]...)
	metav1.SetMetaDataAnnotation(&sec.ObjectMeta, rotatedAt, now.UTC().Format(time.RFC3339Nano))
	return nil
}

// newPair issues a pair for the names from the signing CA.
func (r *rotator) newPair(sec *corev1.Secret, now time.Time) error {
	ca, err := certs.LoadCA(sec.Data[secretSignerCrt], sec.Data[secretSignerKey])
	if err != nil {
		return err
	}
	cert, key, _, err := ca.ServingBetween(now.Add(-time.Minute), now.Add(r.c.Validity), r.c.Names...)
	if err != nil {
		return err
	}
	sec.Data[secretCert] = cert
	sec.Data[secretKey] = key
	return nil
}

// covers reports whether pair is valid for every one of names (a
// deployment may change them).
func covers(pair *x509.Certificate, names []string) bool {
	for _, name := range names {
		if pair.VerifyHostname(name) != nil {
			return false
		}
	}
	return true
}

// rotationTime is when sec's signing CA was made; zero if not said.
func rotationTime(sec *corev1.Secret) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, sec.Annotations[rotatedAt])
	return at
}

// signerKeyID is the key identifier of sec's signing CA, which the
// certificates it signs name as their authority's.
func signerKeyID(sec *corev1.Secret) []byte {
	ca, err := parseCert(sec.Data[secretSignerCrt])
	if err != nil {
		return nil
	}
	return ca.SubjectKeyId
}

// parseCert parses the first certificate of PEM data.
func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// certNotAfter is when the first certificate of PEM data expires.
func certNotAfter(data []byte) time.Time {
	cert, err := parseCert(data)
	if err != nil {
		return time.Time{}
	}
	return cert.NotAfter
}

// validCerts is the certificates of PEM data that have not expired at now.
func validCerts(data []byte, now time.Time) []byte {
	var out []byte
	for _, cert := range bundleCerts(data) {
		if now.Before(cert.NotAfter) {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})...)
		}
	}
	return out
}

// bundleCerts is the certificates of PEM data that parse.
func bundleCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err == nil {
			out = append(out, cert)
		}
	}
}

// certificateDir is certDir, or if it is "", the folder of a self-signed
// pair (selfSigned).
func certificateDir(mgr *kctl.Manager, addr, certDir string) (string, error) {
	if certDir != "" {
		return certDir, nil
	}
	dir, err := selfSigned(mgr, addr)
	if err != nil {
		return "", fmt.Errorf("kctl: webhook server: a self-signed certificate: %w", err)
	}
	return dir, nil
}

// selfSigned writes a pair for 127.0.0.1 and localhost of a CA of its own
// to a new folder, removed when mgr stops, and logs how to point a webhook
// configuration at the server: Serve's certificate without a certDir.
func selfSigned(mgr *kctl.Manager, addr string) (string, error) {
	dir, err := os.MkdirTemp("", "kctl-webhook-self-signed-")
	if err != nil {
		return "", err
	}
	ca, err := certs.NewCA("kctl webhook (self-signed)")
	if err == nil {
		_, err = ca.WriteServing(dir, "127.0.0.1", "localhost")
	}
	if err == nil {
		err = mgr.Add(kctl.Runnable{Name: "webhook self-signed certificate", Run: func(ctx context.Context) error {
			<-ctx.Done()
			return os.RemoveAll(dir)
		}})
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	mgr.Logger().Info("kctl: webhook server: no certificate directory, so a self-signed certificate for 127.0.0.1 and localhost: "+
		"point a webhook configuration at it with clientConfig.url https://127.0.0.1:"+port+"/<path> and this caBundle "+
		"(or give Serve a directory, or use ServeWithCertificates in a cluster)",
		"caBundle", base64.StdEncoding.EncodeToString(ca.PEM()))
	return dir, nil
}

package webhook

// Webhook tests where the real kube-apiserver (kctltest's control plane)
// calls the webhook server on 127.0.0.1, through webhook configurations
// with a caBundle, scoped to the test's namespace. The helpers of every
// test file.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/certs"
	"github.com/kctl-dev/kctl/internal/servetest"
	"github.com/kctl-dev/kctl/kctltest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }

// The helpers the tests share with kctl/debug's (internal/servetest).
var (
	testConfig       = servetest.Config
	testManager      = servetest.Manager
	startManager     = servetest.Start
	freeLoopbackAddr = servetest.FreeAddr
	eventually       = servetest.Eventually
	testRawRequest   = servetest.RawRequest
)

// noServer is the config of a Manager that never contacts a server: a
// test that needs none starts no control plane. Nothing answers on port 1.
func noServer() *rest.Config {
	return &rest.Config{Host: "http://127.0.0.1:1"}
}

// testNamespace is a namespace of the test's own (cfg is the admin's).
func testNamespace(t *testing.T, _ *rest.Config) string { return servetest.Namespace(t) }

type logBuffer = servetest.LogBuffer

// metricsPage serves mgr's metrics on loopback (call it before Start) and
// returns a func that reads the page.
func metricsPage(t *testing.T, mgr *kctl.Manager) (page func() string) {
	t.Helper()
	addr := freeLoopbackAddr(t)
	if err := mgr.ServeMetrics(addr); err != nil {
		t.Fatal(err)
	}
	return func() string {
		t.Helper()
		var body string
		servetest.PollPage(t, addr, "/metrics", "the metrics page", func(code int, b string) bool {
			body = b
			return code == 200
		})
		return body
	}
}

// gadget is the CRD type of the webhook tests; its Go type knows size and
// color, and the CRD keeps any other field (spec.extra).
type gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              gadgetSpec `json:"spec"`
}

type gadgetSpec struct {
	Size  int    `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

var _ = kctl.Declare[gadget](kctl.Resource{Group: "webhook.kctl.dev", Version: "v1", Kind: "Gadget", Namespaced: true})

const gadgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"gadgets.webhook.kctl.dev"},
 "spec":{"group":"webhook.kctl.dev","scope":"Namespaced",
  "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// installGadgetCRD installs the gadget CRD unless it is served already
// (tests share it; none deletes it).
func installGadgetCRD(t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gadgetCRD)
	eventually(t, "the gadget CRD served", func() bool {
		code, _ := testRawRequest(t, cfg, "GET", "/apis/webhook.kctl.dev/v1/namespaces/"+ns+"/gadgets", "")
		return code == 200
	})
}

// webhookFixture is a Manager serving webhooks over HTTPS on loopback with
// a certificate of its own CA.
type webhookFixture struct {
	cfg   *rest.Config
	ns    string
	mgr   *kctl.Manager
	hooks *Server
	// page reads the metrics page of mgr.
	page    func() string
	addr    string
	ca      *certs.CA
	certDir string
}

func newWebhookFixture(t *testing.T) *webhookFixture {
	t.Helper()
	f := &webhookFixture{cfg: testConfig(t), addr: freeLoopbackAddr(t), certDir: t.TempDir()}
	f.ns = testNamespace(t, f.cfg)
	var err error
	if f.ca, err = certs.NewCA("kctl webhook test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ca.WriteServing(f.certDir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	f.mgr = testManager(t, f.cfg, f.ns, kctl.Options{})
	f.page = metricsPage(t, f.mgr)
	if f.hooks, err = Serve(f.mgr, f.addr, f.certDir); err != nil {
		t.Fatal(err)
	}
	return f
}

// start starts f's Manager and returns once its webhook server accepts
// connections: a request sent before then is refused.
func (f *webhookFixture) start(t *testing.T) {
	t.Helper()
	startManager(t, f.mgr)
	eventually(t, "the webhook server listening", func() bool {
		c, err := net.Dial("tcp", f.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// webhookConfig is one webhook of a Validating or MutatingWebhookConfiguration.
type webhookConfig struct {
	name          string
	url           string
	caBundle      []byte
	ns            string // the namespace it applies to
	resource      string // "gadgets.webhook.kctl.dev" or "configmaps"
	failurePolicy string
	timeout       int
}

// applyWebhooks creates a kind ("Validating" or "Mutating")
// WebhookConfiguration named name with hooks and returns a func that
// deletes it; defer it (at t.Cleanup, t.Context() has ended).
func applyWebhooks(t *testing.T, cfg *rest.Config, kind, name string, hooks ...webhookConfig) (remove func()) {
	t.Helper()
	var list []any
	for _, w := range hooks {
		plural, group, _ := strings.Cut(w.resource, ".")
		list = append(list, map[string]any{
			"name":                    w.name,
			"clientConfig":            map[string]any{"url": w.url, "caBundle": base64.StdEncoding.EncodeToString(w.caBundle)},
			"rules":                   []any{map[string]any{"apiGroups": []string{group}, "apiVersions": []string{"*"}, "resources": []string{plural}, "operations": []string{"CREATE", "UPDATE", "DELETE"}}},
			"namespaceSelector":       map[string]any{"matchLabels": map[string]string{"kubernetes.io/metadata.name": w.ns}},
			"failurePolicy":           w.failurePolicy,
			"sideEffects":             "None",
			"admissionReviewVersions": []string{"v1"},
			"timeoutSeconds":          w.timeout,
		})
	}
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1",
		"kind":       kind + "WebhookConfiguration",
		"metadata":   map[string]any{"name": name},
		"webhooks":   list,
	})
	path := "/apis/admissionregistration.k8s.io/v1/" + strings.ToLower(kind) + "webhookconfigurations"
	testRawRequest(t, cfg, "DELETE", path+"/"+name, "") // an earlier run's
	if code, resp := testRawRequest(t, cfg, "POST", path, string(body)); code != 201 {
		t.Fatalf("creating the %sWebhookConfiguration: %d %s", kind, code, resp)
	}
	return func() { testRawRequest(t, cfg, "DELETE", path+"/"+name, "") }
}

// apiResponse is one answer of the API server.
type apiResponse struct {
	code     int
	body     []byte
	warnings []string
}

// status decodes the answer as a metav1.Status.
func (r apiResponse) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("not a Status: %s", r.body)
	}
	return s
}

// testRequest is testRawRequest keeping the Warning headers.
func testRequest(t *testing.T, cfg *rest.Config, method, path, body string) apiResponse {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(cfg.Host, "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiResponse{code: resp.StatusCode, body: b, warnings: resp.Header.Values("Warning")}
}

func gadgetJSON(name, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"webhook.kctl.dev/v1","kind":"Gadget","metadata":{"name":%q},"spec":%s}`, name, spec)
}

// servedSerial dials the webhook server as a TLS client trusting ca and
// returns the serial number of the certificate it serves.
func servedSerial(t *testing.T, addr string, ca *certs.CA) *big.Int {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// webhookClient is an HTTPS client trusting ca.
func webhookClient(ca *certs.CA) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
}

// testCRDAbsent deletes the CRD plural.group if an earlier run left it, waits
// (30 s at most) until neither it nor its API in namespace ns is served (the
// API outlives the CRD object for a moment), and returns a func that deletes
// it again. Defer that func: at t.Cleanup, t.Context() has ended.
func testCRDAbsent(t *testing.T, cfg *rest.Config, ns, group, version, plural string) (deleteAgain func()) {
	t.Helper()
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + plural + "." + group
	apiPath := "/apis/" + group + "/" + version + "/namespaces/" + ns + "/" + plural
	testRawRequest(t, cfg, "DELETE", crdPath, "")
	eventually(t, "CRD "+plural+"."+group+" of an earlier run gone", func() bool {
		crd, _ := testRawRequest(t, cfg, "GET", crdPath, "")
		api, _ := testRawRequest(t, cfg, "GET", apiPath, "")
		return crd == 404 && api == 404
	})
	return func() { testRawRequest(t, cfg, "DELETE", crdPath, "") }
}

// jsonCopy is a deep copy of obj, through JSON.
func jsonCopy[T any](t *testing.T, obj *T) T {
	t.Helper()
	var out T
	data, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		t.Errorf("copying %T: %v", obj, err)
	}
	return out
}

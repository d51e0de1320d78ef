package kctl

import (
	"encoding/json"
	"fmt"
	"io"
	"k8s.io/client-go/rest"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"crypto/tls"
)

// metricsReaderRole is the ClusterRole that ServeSecureMetrics documents.
const metricsReaderRole = `"rules":[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]`

// managerFixture is a Manager of its own namespace.
type managerFixture struct {
	cfg *rest.Config
	ns  string
	mgr *Manager
}

// serviceAccountToken creates ServiceAccount name in ns and returns a
// token of it from the TokenRequest API.
func serviceAccountToken(t *testing.T, f *managerFixture, name string) string {
	t.Helper()
	sa := fmt.Sprintf(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":%q}}`, name)
	if code, body := testRawRequest(t, f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/serviceaccounts", sa); code != 201 {
		t.Fatalf("creating ServiceAccount %s: %d %s", name, code, body)
	}
	code, body := testRawRequest(t, f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/serviceaccounts/"+name+"/token",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}`)
	if code != 201 {
		t.Fatalf("TokenRequest for %s: %d %s", name, code, body)
	}
	var tr struct{ Status struct{ Token string } }
	json.Unmarshal(body, &tr)
	return tr.Status.Token
}

// scrape GETs https://addr/metrics with token ("" sends none), trusting
// any certificate (ServeSecureMetrics made a self-signed one).
func scrape(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSecureMetrics_RealPrometheusWithServiceAccountToken: a Prometheus
// scrapes with a ServiceAccount token bound to the documented ClusterRole;
// a token without it gets 403, none or a bad one 401, and neither sees the
// page. Removing the binding takes effect once the cached verdict expires.
func TestSecureMetrics_RealPrometheusWithServiceAccountToken(t *testing.T) {
	f := &managerFixture{cfg: testConfig(t)}
	f.ns = testNamespace(t, f.cfg)
	f.mgr = testManager(t, f.cfg, f.ns, Options{})
	addr := freeLoopbackAddr(t)
	if err := f.mgr.ServeSecureMetrics(addr, ""); err != nil {
		t.Fatal(err)
	}
	startManager(t, f.mgr)
	allowed := serviceAccountToken(t, f, "prometheus")
	denied := serviceAccountToken(t, f, "nobody")
	role := "kctl-test-metrics-reader-" + f.ns
	roles := "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	bindings := "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
	if code, body := testRawRequest(t, f.cfg, "POST", roles, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"`+role+`"},`+metricsReaderRole+`}`); code != 201 {
		t.Fatalf("creating the ClusterRole: %d %s", code, body)
	}
	defer testRawRequest(t, f.cfg, "DELETE", roles+"/"+role, "")
	binding := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":%q},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},
		"subjects":[{"kind":"ServiceAccount","name":"prometheus","namespace":%q}]}`, role, role, f.ns)
	if code, body := testRawRequest(t, f.cfg, "POST", bindings, binding); code != 201 {
		t.Fatalf("creating the ClusterRoleBinding: %d %s", code, body)
	}
	defer testRawRequest(t, f.cfg, "DELETE", bindings+"/"+role, "")

	eventually(t, "the secure metrics server answering", func() bool {
		code, _ := scrape(t, addr, allowed)
		return code == 200
	})
	for _, tc := range []struct {
		who, token string
		code       int
	}{{"no token", "", 401}, {"a token the API server rejects", "not-a-token", 401}, {"a token without the ClusterRole", denied, 403}, {"the Prometheus token", allowed, 200}} {
		code, body := scrape(t, addr, tc.token)
		if code != tc.code || (code != 200) == strings.Contains(body, "go_goroutines") {
			t.Errorf("GET /metrics with %s = %d %.100q, want %d, with the page only on 200", tc.who, code, body, tc.code)
		}
	}

	dir := t.TempDir()
	for name, token := range map[string]string{"allowed": allowed, "denied": denied} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	job := func(name string) string {
		return fmt.Sprintf("  - job_name: %s\n    scheme: https\n    tls_config: {insecure_skip_verify: true}\n"+
			"    authorization: {credentials_file: %q}\n    static_configs:\n      - targets: [%q]\n", name, filepath.Join(dir, name), addr)
	}
	prom := startPrometheusWith(t, job("allowed")+job("denied"))
	waitForPromQL(t, prom, `up{job="allowed"}`, "1")
	waitForPromQL(t, prom, `count(go_goroutines{job="allowed"})`, "1")
	waitForPromQL(t, prom, `up{job="denied"}`, "0")

	testRawRequest(t, f.cfg, "DELETE", bindings+"/"+role, "")
	eventually(t, "403 once the binding is gone and the cached verdict expired", func() bool {
		code, _ := scrape(t, addr, allowed)
		return code == 403
	})
}

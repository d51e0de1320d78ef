package kctl

// Integration tests of the test helpers in testenv_test.go and of the control
// plane that internal/controlplane starts.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"k8s.io/client-go/rest"
)

func TestControlPlane_TestNamespace_IsFreshOnEveryCall(t *testing.T) {
	cfg := testConfig(t)
	a, b := testNamespace(t, cfg), testNamespace(t, cfg)
	if a == b {
		t.Fatalf("testNamespace returned %q twice", a)
	}
	for _, ns := range []string{a, b} {
		if code, body := testRawRequest(t, cfg, "GET", "/api/v1/namespaces/"+ns, ""); code != http.StatusOK {
			t.Errorf("GET namespace %s = %d %s, want 200", ns, code, body)
		}
	}
}

func TestControlPlane_UnprivilegedUser_IsForbiddenToListPods(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	path := "/api/v1/namespaces/" + ns + "/pods"
	if code, body := testRawRequest(t, testUnprivilegedConfig(t), "GET", path, ""); code != http.StatusForbidden {
		t.Errorf("unprivileged GET %s = %d %s, want 403", path, code, body)
	}
	if code, body := testRawRequest(t, testConfig(t), "GET", path, ""); code != http.StatusOK {
		t.Errorf("admin GET %s = %d %s, want 200", path, code, body)
	}
}

// No controller-manager creates the "default" ServiceAccount; pods must be
// accepted all the same.
func TestControlPlane_Pod_IsCreatedWithoutServiceAccount(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	if code, body := testRawRequest(t, cfg, "POST", "/api/v1/namespaces/"+ns+"/pods", pod); code != http.StatusCreated {
		t.Fatalf("creating a pod = %d %s, want 201", code, body)
	}
}

// After a compaction the API server's watch cache still serves older
// resourceVersions; a restart empties it, and they are gone (410 Expired).
func TestControlPlane_EtcdCompactAndRestart_EndsWatchesAndExpiresOldResourceVersions(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	oldRV := createConfigMap(t, cfg, ns, "before")
	createConfigMap(t, cfg, ns, "later")
	watchEnded := openWatch(t, cfg, path+"?watch=true")

	etcdCompact(t)
	restartAPIServer(t)

	select {
	case <-watchEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch opened before the restart is still open 30 s after it")
	}
	code, body := testRawRequest(t, cfg, "GET", path+"?watch=true&timeoutSeconds=1&resourceVersion="+oldRV, "")
	if code != http.StatusOK || !strings.Contains(string(body), `"code":410`) {
		t.Errorf("watch from resourceVersion %s = %d %s, want an ERROR event with code 410", oldRV, code, body)
	}
	createConfigMap(t, cfg, ns, "after")
}

// createConfigMap creates an empty configmap and returns its resourceVersion.
func createConfigMap(t *testing.T, cfg *rest.Config, ns, name string) string {
	t.Helper()
	cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name)
	code, body := testRawRequest(t, cfg, "POST", "/api/v1/namespaces/"+ns+"/configmaps", cm)
	if code != http.StatusCreated {
		t.Fatalf("creating configmap %s/%s = %d %s, want 201", ns, name, code, body)
	}
	var created struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	return created.Metadata.ResourceVersion
}

// openWatch starts a watch and returns a channel closed when its stream ends.
func openWatch(t *testing.T, cfg *rest.Config, path string) <-chan struct{} {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("watch %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %s", path, resp.Status)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		}
	}()
	return ended
}

func TestControlPlane_EtcdCompact_DropsOlderRevisionsInEtcd(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	oldRV := createConfigMap(t, cfg, ns, "before")
	createConfigMap(t, cfg, ns, "later")

	rev := etcdCompact(t)

	if old, _ := strconv.ParseInt(oldRV, 10, 64); rev <= old {
		t.Fatalf("etcdCompact() = %d, want a revision after %s", rev, oldRV)
	}
	url := controlplane.Require(t).EtcdURL + "/v3/kv/range"
	resp, err := http.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"key":"AA==","revision":%q}`, oldRV)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(answer), "compacted") {
		t.Errorf("etcd range at revision %s after compaction = %s %s, want a compacted error", oldRV, resp.Status, answer)
	}
}

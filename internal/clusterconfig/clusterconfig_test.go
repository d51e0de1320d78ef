package clusterconfig

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKubeconfig writes a kubeconfig for the server at host to path and returns path.
func writeKubeconfig(t *testing.T, path, host string) string {
	t.Helper()
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n", host)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad_TriesFlagThenKUBECONFIGThenInClusterThenHome(t *testing.T) {
	dir := t.TempDir()
	flag := writeKubeconfig(t, filepath.Join(dir, "flag"), "https://flag:6443")
	env := writeKubeconfig(t, filepath.Join(dir, "env"), "https://env:6443")
	writeKubeconfig(t, filepath.Join(dir, "home/.kube/config"), "https://home:6443")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("KUBECONFIG", env)
	for _, tc := range []struct{ flag, env, want string }{
		{flag, env, "https://flag:6443"}, {"", env, "https://env:6443"}, {"", "", "https://home:6443"},
	} {
		t.Setenv("KUBECONFIG", tc.env)
		cfg, err := Load(tc.flag, "", slog.Default())
		if err != nil || cfg.Host != tc.want {
			t.Errorf("LoadConfig(%q) with KUBECONFIG=%q = %v, %v; want host %s", tc.flag, tc.env, cfg, err, tc.want)
		}
	}
	t.Setenv("HOME", filepath.Join(dir, "nohome"))
	_, err := Load("", "", slog.Default())
	if err == nil || !strings.Contains(err.Error(), "$KUBECONFIG (not set)") || !strings.Contains(err.Error(), "in-cluster") || !strings.Contains(err.Error(), "pass --kubeconfig") {
		t.Errorf("LoadConfig with nothing: err = %v, want one listing what was tried and what to do", err)
	}
	if _, err := Load(filepath.Join(dir, "nope"), "", slog.Default()); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("LoadConfig of a missing file: err = %v", err)
	}
}

// In a pod (KUBERNETES_SERVICE_HOST and _PORT set) the in-cluster service
// account comes before ~/.kube/config, and wins even when it is broken: here
// its token file is missing, and the error says so rather than falling back
// to another cluster.
func TestLoad_InClusterVariablesSetWithoutAToken_IsAnErrorNamingTheTokenFile(t *testing.T) {
	const tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	if _, err := os.Stat(tokenFile); err == nil {
		t.Skipf("%s exists: this test runs in a pod", tokenFile)
	}
	dir := t.TempDir()
	flag := writeKubeconfig(t, filepath.Join(dir, "flag"), "https://flag:6443")
	env := writeKubeconfig(t, filepath.Join(dir, "env"), "https://env:6443")
	writeKubeconfig(t, filepath.Join(dir, "home/.kube/config"), "https://home:6443")
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	for _, tc := range []struct{ flag, env, want string }{{flag, env, "https://flag:6443"}, {"", env, "https://env:6443"}} {
		t.Setenv("KUBECONFIG", tc.env)
		cfg, err := Load(tc.flag, "", slog.Default())
		if err != nil || cfg.Host != tc.want {
			t.Errorf("LoadConfig(%q) in a pod with KUBECONFIG=%q = %v, %v; want host %s", tc.flag, tc.env, cfg, err, tc.want)
		}
	}
	t.Setenv("KUBECONFIG", "")
	_, err := Load("", "", slog.Default())
	if err == nil || !strings.Contains(err.Error(), "in-cluster") || !strings.Contains(err.Error(), tokenFile) {
		t.Errorf("LoadConfig(\"\") in a pod without a token: err = %v; want the in-cluster error naming %s, not ~/.kube/config's cluster", err, tokenFile)
	}
}

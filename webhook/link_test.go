package webhook

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServing_WebhooksAndSecureMetrics_LinkedOnlyWhenCalled: a program that
// serves metrics and probes but never calls webhook.Serve,
// ServeSecureMetrics or debug.ServePprof links none of their code, nor the
// API packages of reviews (their type registration would come with an
// import).
func TestServing_WebhooksAndSecureMetrics_LinkedOnlyWhenCalled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(wd) // the module's
	optIns := []string{      // part of the name of a function of each
		"internal/certwatch.",
		"internal/jsonpatch.",
		"webhook.(*Server).handle",
		"internal/metricsauth.(*Auth).check",
		"debug.servePprof",
		"crypto/tls.(*Conn).serverHandshake",
	}
	never := []string{"k8s.io/api/admission/", "k8s.io/api/authentication/", "k8s.io/api/authorization/", "net/http/pprof."}
	const program = `package main

import (
	"context"

	"github.com/kctl-dev/kctl"
	%s
	corev1 "k8s.io/api/core/v1"
)

func main() {
	mgr, _ := kctl.NewManager(kctl.Options{})
	kctl.NewController(mgr, "c", func(context.Context, *corev1.ConfigMap) (kctl.Result, error) { return kctl.Result{}, nil })
	mgr.ServeMetrics(":1")
	mgr.ServeHealth(":2")
	%s
	mgr.Start(context.Background())
}
`
	for _, tc := range []struct {
		name, imports, calls string
		linked               bool
	}{
		{"none", "", "", false},
		{"all", `"github.com/kctl-dev/kctl/debug"
	"github.com/kctl-dev/kctl/webhook"`, `hooks, _ := webhook.Serve(mgr, ":3", "/certs")
	webhook.Validate(hooks, func(context.Context, webhook.AdmissionRequest[corev1.ConfigMap]) ([]string, error) { return nil, nil })
	webhook.Default(hooks, func(context.Context, *corev1.ConfigMap) error { return nil })
	mgr.ServeSecureMetrics(":4", "")
	debug.ServePprof(mgr, ":5")`, true},
	} {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"go.work":      "go 1.26.0\n\nuse (\n\t" + strconv.Quote(root) + "\n\t./prog\n)\n",
			"prog/go.mod":  "module prog\n\ngo 1.26.0\n",
			"prog/main.go": fmt.Sprintf(program, tc.imports, tc.calls),
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "prog.bin"), ".")
		build.Dir, build.Env = filepath.Join(dir, "prog"), append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the program calling %s: %v\n%s", tc.name, err, out)
		}
		nm, err := exec.Command("go", "tool", "nm", filepath.Join(dir, "prog.bin")).Output()
		if err != nil {
			t.Fatalf("go tool nm: %v", err)
		}
		for _, sym := range optIns {
			if linked := strings.Contains(string(nm), sym); linked != tc.linked {
				t.Errorf("a program calling %s of the serving opt-ins: %s linked = %v, want %v", tc.name, sym, linked, tc.linked)
			}
		}
		for _, sym := range never {
			if strings.Contains(string(nm), sym) {
				t.Errorf("a program calling %s of the serving opt-ins links %s", tc.name, sym)
			}
		}
	}
}

package kctltest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func goCommand(t *testing.T) string {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	return goCmd
}

// goEnv is `go env name`.
func goEnv(t *testing.T, name string) string {
	out, err := exec.Command(goCommand(t), "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// testdata/inmemory is a user's module whose controller is tested with
// StartInMemory only. Its go test passes on a machine where the control
// plane was never built: here, with a user cache directory of its own,
// empty, which is left without a control plane (nothing built, nothing
// downloaded).
func TestInMemory_OutsideModule_NeedsNoControlPlane(t *testing.T) {
	dir := copyModule(t, "testdata/inmemory")
	cache := t.TempDir() // the user's cache directory, where kctltest would build the control plane
	cmd := exec.CommandContext(t.Context(), goCommand(t), "test", "-count=1", "-v", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "XDG_CACHE_HOME="+cache, "HOME="+cache,
		"GOCACHE="+goEnv(t, "GOCACHE"), "GOMODCACHE="+goEnv(t, "GOMODCACHE"), "KCTL_CONTROLPLANE_BIN=", "CI=true")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go test of a module tested in memory: %.1f s", time.Since(start).Seconds())
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWidget_BecomesReady") {
		t.Fatalf("go test in %s: %v\n%s", dir, err, out)
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if e.Name() == "kctl" {
			t.Errorf("the user cache directory has a kctl folder after tests in memory only: something built the control plane")
		}
	}
}

// No production binary links the in-memory server: podcount, built as a
// user builds it, has no symbol of kctltest (nor of net/http/httptest).
func TestInMemory_NotLinkedIntoProductionBinaries(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "podcount")
	build := exec.CommandContext(t.Context(), goCommand(t), "build", "-o", bin, "./example/podcount")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./example/podcount: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), goCommand(t), "tool", "nm", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "kctl/kctltest.") || strings.Contains(line, "net/http/httptest.") {
			t.Errorf("podcount links %s", strings.TrimSpace(line))
		}
	}
	if !strings.Contains(string(out), "github.com/kctl-dev/kctl.") {
		t.Errorf("go tool nm shows no kctl symbol in podcount: the check looks at nothing")
	}
}

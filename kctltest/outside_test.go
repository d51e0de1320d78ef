package kctltest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/kctltest"
)

// testdata/outside is a module of its own with a CRD controller and its
// tests, written with kctltest's exported API only, as a user would, and a
// package whose tests have no TestMain (package nomain). This runs them: a copy in a temporary folder whose go.mod replaces kctl with
// this checkout, so they see kctl as a user's module does.
func TestOutsideModule_TestsACRDControllerEndToEnd(t *testing.T) {
	kctltest.Start(t) // skips or fails as every integration test does; the copy starts its own
	dir := copyModule(t, "testdata/outside")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(t.Context(), goCmd, "test", "-count=1", "-v", "./...")
	cmd.Dir = dir
	// -mod=mod: kctl's requirements may have moved on since testdata/outside/go.mod was written.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go test in a module outside kctl's: %.1f s", time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("go test in %s: %v\n%s", dir, err, out)
	}
	for _, want := range []string{"--- PASS: TestFoo_GetsItsConfigMapAndStatus", "--- PASS: TestFoo_GetsItsConfigMapAndStatus_InMemory", "--- PASS: TestReconcile_WritesTheConfigMapThenTheStatus",
		"--- PASS: TestStart_WithoutMain_FailsTheTestAndNamesTheFix"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go test output lacks %q:\n%s", want, out)
		}
	}
}

// copyModule copies the module in src to a temporary folder and points its
// go.mod's replace of kctl at this checkout, so that its tests see kctl as
// a user's module does; it returns the folder.
func copyModule(t *testing.T, src string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gomod = []byte(strings.ReplaceAll(string(gomod), "=> ../../..", "=> "+root))
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

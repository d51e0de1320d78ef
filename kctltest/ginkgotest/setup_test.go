package ginkgotest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

// A failing suite-level setup (Main's) runs no test, says why, and fails
// the test binary.
func TestMain_SetupFails_RunsNoTest(t *testing.T) {
	kctltest.Start(t) // skips or fails as every integration test does; setupfail starts its own
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(t.Context(), goCmd, "test", "-count=1", "-v", "./setupfail")
	cmd.Env = append(os.Environ(), "KCTLTEST_SETUP_FAILS=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go test of a package whose setup fails passed:\n%s", out)
	}
	if !strings.Contains(string(out), "the suite's setup failed, no test ran: the CRDs are missing, as asked") ||
		strings.Contains(string(out), "a test ran") {
		t.Errorf("the output lacks the setup's failure, or a test ran:\n%s", out)
	}
}

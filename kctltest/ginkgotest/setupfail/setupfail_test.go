// Package setupfail has a suite-level setup that fails:
// TestMain_SetupFails_RunsNoTest (in the parent folder) runs it with
// KCTLTEST_SETUP_FAILS set, and checks that no test runs. Run any other way
// (go test ./... of the module), it runs nothing and starts nothing.
package setupfail_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

func TestMain(m *testing.M) {
	if os.Getenv("KCTLTEST_SETUP_FAILS") == "" {
		fmt.Println("setupfail: run only by TestMain_SetupFails_RunsNoTest; nothing to do here")
		os.Exit(0)
	}
	os.Exit(kctltest.Main(m, func(t kctltest.TB, env *kctltest.Env) error {
		return errors.New("the CRDs are missing, as asked")
	}))
}

// TestMustNotRun marks, by its output, that a test ran although the suite's
// setup failed; the parent's test fails when it sees the mark.
func TestMustNotRun(t *testing.T) {
	t.Log("a test ran")
}

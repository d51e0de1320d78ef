// Package setupfail has a suite-level setup that fails when
// KCTLTEST_SETUP_FAILS is set: TestMain_SetupFails_RunsNoTest (in the
// parent folder) runs it so, and checks that no test runs.
package setupfail_test

import (
	"errors"
	"os"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

func TestMain(m *testing.M) {
	os.Exit(kctltest.Main(m, func(t kctltest.TB, env *kctltest.Env) error {
		if os.Getenv("KCTLTEST_SETUP_FAILS") != "" {
			return errors.New("the CRDs are missing, as asked")
		}
		return nil
	}))
}

func TestRuns(t *testing.T) {
	t.Log("a test ran")
}

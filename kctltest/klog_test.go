package kctltest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/kctltest"
	"k8s.io/klog/v2"
)

// klogHelperEnv makes TestHelper_Klog* run: two parallel tests, each
// logging through klog (as client-go does) and through t, at once.
const klogHelperEnv = "KCTLTEST_KLOG_HELPER"

func TestHelper_KlogA(t *testing.T) { klogHelper(t, "A") }
func TestHelper_KlogB(t *testing.T) { klogHelper(t, "B") }

func klogHelper(t *testing.T, name string) {
	if os.Getenv(klogHelperEnv) == "" {
		t.Skip("runs only as a helper process")
	}
	t.Parallel()
	for i := range 20 {
		klog.Warningf("klog-probe from %s, %d", name, i)
		klog.V(0).InfoS("klog-probe", "from", name, "i", i)
		t.Logf("t-probe from %s, %d", name, i)
		time.Sleep(5 * time.Millisecond) // to interleave with the other test
	}
}

// klog's lines reach no test's output: Main prints them after the last
// test, or writes them to $KCTLTEST_KLOG.
func TestMain_KlogLines_GoToNoTestButToOnePlace(t *testing.T) {
	run := func(env ...string) string {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelper_Klog", "-test.v")
		cmd.Env = append(os.Environ(), append(env, klogHelperEnv+"=1")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the helper: %v\n%s", err, out)
		}
		return string(out)
	}

	out := run(kctltest.KlogEnv + "=")
	header := strings.Index(out, "--- kctltest: klog's lines")
	lastPass := max(strings.LastIndex(out, "--- PASS: TestHelper_KlogA"), strings.LastIndex(out, "--- PASS: TestHelper_KlogB"))
	if header < 0 || header < lastPass {
		t.Fatalf("klog's lines are not printed after the last test (header at %d, last PASS at %d):\n%s", header, lastPass, out)
	}
	if first := strings.Index(out, "klog-probe"); first < header {
		t.Errorf("a klog line is in the tests' output, before the klog block:\n%s", out)
	}
	if n := strings.Count(out[header:], "klog-probe from A"); n != 20 {
		t.Errorf("the klog block holds %d of test A's 20 warnings:\n%s", n, out)
	}

	file := filepath.Join(t.TempDir(), "klog.log")
	out = run(kctltest.KlogEnv + "=" + file)
	if strings.Contains(out, "klog-probe") || !strings.Contains(out, file) {
		t.Errorf("with %s=%s, the output holds a klog line or does not name the file:\n%s", kctltest.KlogEnv, file, out)
	}
	b, err := os.ReadFile(file)
	if err != nil || strings.Count(string(b), "klog-probe from B") != 20 {
		t.Errorf("the klog file holds %d of test B's 20 warnings (%v):\n%s", strings.Count(string(b), "klog-probe from B"), err, b)
	}
}

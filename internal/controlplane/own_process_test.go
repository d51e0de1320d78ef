package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const probeEnv = "KCTL_TEST_OWN_PROCESS_PROBE"

// TestOwnProcessProbe runs only as the process that
// TestInOwnProcess_ChildRunsTheBodyAndItsFailureIsTheParents starts.
func TestOwnProcessProbe(t *testing.T) {
	mode := os.Getenv(probeEnv)
	if mode == "" {
		t.Skip("runs only as a helper process")
	}
	parent := os.Getpid()
	if !InOwnProcess(t) {
		fmt.Printf("parent %d returned\n", parent)
		return
	}
	fmt.Printf("body ran in %d, child of %d\n", os.Getpid(), os.Getppid())
	if mode == "fail" {
		t.Error("failing on purpose")
	}
}

// The body after InOwnProcess runs in a child only, and the child's failure
// is the parent's.
func TestInOwnProcess_ChildRunsTheBodyAndItsFailureIsTheParents(t *testing.T) {
	for _, mode := range []string{"pass", "fail"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOwnProcessProbe$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), probeEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		text := string(out)
		var parent, body, bodyParent int
		for _, line := range strings.Split(text, "\n") {
			fmt.Sscanf(strings.TrimSpace(line), "parent %d returned", &parent)
			fmt.Sscanf(strings.TrimSpace(line), "body ran in %d, child of %d", &body, &bodyParent)
		}
		if parent == 0 || body == 0 || body == parent || bodyParent != parent {
			t.Errorf("%s: want the body in a child of the parent, and the parent returning; got parent %d, body in %d (child of %d):\n%s",
				mode, parent, body, bodyParent, text)
		}
		if mode == "pass" && err != nil {
			t.Errorf("pass: the parent failed: %v\n%s", err, text)
		}
		if mode == "fail" && (err == nil || !strings.Contains(text, "failing on purpose")) {
			t.Errorf("fail: want the parent to fail with the child's message; exit %v:\n%s", err, text)
		}
	}
}

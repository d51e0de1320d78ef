package controlplane

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ownProcessEnv names, in a child started by InOwnProcess, the test it runs
// and the parent's control plane it uses: "TestName|dir|apiURL|etcdURL".
const ownProcessEnv = "KCTL_TEST_OWN_PROCESS"

// InOwnProcess runs the calling test again in a process of its own (this
// test binary, -test.run=^Name$), for a measurement the rest of the suite
// would disturb: a live-heap bound sees only this test's memory, not what
// earlier tests left. In the parent it starts the control plane (Require),
// lends it to the child, waits, copies the child's output into t's log,
// fails t if the child failed, and returns false: the parent's test is then
// over. In the child it returns true, and the test goes on there. If the
// parent's control plane has started (call Require first), the child's
// Require returns it (neither started nor stopped by the child). A subtest
// cannot use it.
//
//	cfg := testConfig(t) // starts the control plane in the parent
//	if !controlplane.InOwnProcess(t) {
//		return
//	}
func InOwnProcess(t *testing.T) bool {
	t.Helper()
	v := os.Getenv(ownProcessEnv)
	if v != "" {
		if strings.SplitN(v, "|", 2)[0] != t.Name() {
			t.Fatalf("kctl: this process runs %s in a process of its own, not %s", v, t.Name())
		}
		return true
	}
	lent := t.Name()
	if shared.up.Load() {
		lent = strings.Join([]string{t.Name(), shared.c.Dir, shared.c.APIURL, shared.c.EtcdURL}, "|")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ownProcessEnv+"="+lent)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	t.Logf("in a process of its own:\n%s", out.String())
	if err != nil {
		t.Errorf("%s failed in a process of its own: %v", t.Name(), err)
	}
	return false
}

// lentCluster is the parent's control plane in a child of InOwnProcess, nil
// elsewhere.
func lentCluster() *Cluster {
	f := strings.Split(os.Getenv(ownProcessEnv), "|")
	if len(f) != 4 {
		return nil
	}
	return &Cluster{Dir: f[1], APIURL: f[2], EtcdURL: f[3]}
}

package kctl

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalHelperEnv makes this test binary, run again by a test, a helper
// process: TestMain calls signalHelper instead of running the tests.
const signalHelperEnv = "KCTL_SIGNAL_HELPER"

// signalHelper calls SignalContext, prints "ready", prints "stopping" when
// the context ends, then hangs, as a shutdown that never ends: only the
// second signal can end the process.
func signalHelper() {
	ctx := SignalContext()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping")
	select {}
}

// The first SIGINT ends SignalContext's context; a second one exits the
// process at once with status 1, even though its shutdown hangs.
func TestSignalContext_SecondSignal_ExitsWithStatus1(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalHelperEnv+"=1")
	var out logBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // an error if it has exited already
		<-exited
	})
	eventually(t, `the helper to print "ready"`, func() bool { return strings.Contains(out.String(), "ready\n") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	eventually(t, `the helper to print "stopping"`, func() bool { return strings.Contains(out.String(), "stopping\n") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the process still runs 10s after a second SIGINT; output:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("after a second SIGINT the process ended with %v (exit code %d), want exit status 1; output:\n%s", waitErr, code, out.String())
	}
}

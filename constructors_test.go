package kctl

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// Issue 25, item 9: mgr.Config() is the Manager's rest.Config, as a copy.
func TestManager_Config_IsACopyThatWorks(t *testing.T) {
	cfg := testConfig(t)
	mgr := testManager(t, cfg, "default", Options{})
	got := mgr.Config()
	if got.Host != cfg.Host {
		t.Errorf("Config().Host = %q, want %q", got.Host, cfg.Host)
	}
	got.Host = "https://127.0.0.1:1"
	if mgr.Config().Host != cfg.Host {
		t.Errorf("changing Config()'s result changed the Manager's")
	}
	conn, err := NewConn(mgr.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient[corev1.Namespace](conn).Get(t.Context(), "", "default"); err != nil {
		t.Errorf("a client made from Config() cannot read: %v", err)
	}
}

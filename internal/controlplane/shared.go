package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// shared is the control plane of this test binary: started by the first
// Require, stopped by RunTests once the tests are done, or by a SIGINT or
// SIGTERM, or, when the process dies any other way, by the kernel (Linux)
// and its reaper, which also removes its files (see Reaper).
// Once start has run, c or err is set and never changes.
var shared struct {
	main    atomic.Bool     // RunTests is running the tests
	ctx     context.Context // ends on SIGINT or SIGTERM: a build or start in progress stops
	once    sync.Once
	c       *Cluster
	lent    bool        // c is the parent's (InOwnProcess): never stopped here
	up      atomic.Bool // c started here: InOwnProcess lends it
	err     error
	stopped sync.Once
	reaper  *Reaper      // removes c.Dir if this process dies before stopShared
	skipped atomic.Int32 // tests skipped for want of a control plane
}

// RunTests runs m's tests and then stops the control plane if one started,
// and reports on the terminal how many tests were skipped for want of one.
// It returns m.Run's exit code. Call it from TestMain.
func RunTests(m *testing.M) int {
	return RunTestsWith(m, nil, nil)
}

// RunTestsWith is RunTests that calls before (if not nil) before the tests,
// and after (if not nil) once they are done, before the control plane
// stops. If before returns an error, no test runs: it is printed on
// standard error and the exit code is 1.
func RunTestsWith(m *testing.M, before func() error, after func()) int {
	ctx, cancel := context.WithCancel(context.Background())
	shared.ctx = ctx
	shared.main.Store(true)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel()
		stopShared()
		signal.Reset(s)
		syscall.Kill(os.Getpid(), s.(syscall.Signal)) // die of it, as without this handler
	}()
	code := 1
	err := error(nil)
	if before != nil {
		err = before()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kctl: the suite's setup failed, no test ran: %v\nFAIL\n", err)
	} else {
		code = m.Run()
	}
	if after != nil {
		after()
	}
	stopShared()
	if n := shared.skipped.Load(); n > 0 {
		why := error(shared.err)
		if why == nil {
			why = errors.New("a control plane with extra flags did not start (see the skipped tests)")
		}
		loud(fmt.Sprintf("\n*** kctl: SKIPPED %d INTEGRATION TESTS: no control plane: %v ***\n\n", n, why))
	}
	return code
}

// T is what Require needs of a test: *testing.T has it, and so does
// Ginkgo's GinkgoT().
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

// Require returns this test binary's control plane, starting it on first use
// (about 5 s; building the binaries first if need be, see Binaries). If it
// cannot start, t fails with the reason when $CI is true, and is skipped
// otherwise, after one loud line on the terminal saying why and how to fix it.
func Require(t T) *Cluster {
	t.Helper()
	if !shared.main.Load() {
		t.Fatal("kctl: the control plane needs TestMain to stop it after the tests: add\n" +
			"\tfunc TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }")
	}
	shared.once.Do(func() { startShared(deadlineOf(t)) })
	if shared.err == nil {
		return shared.c
	}
	msg := fmt.Sprintf("kctl: cannot start the local control plane: %v", shared.err)
	if isCI() {
		t.Fatalf("%s\n(CI=true: an integration test never skips)", msg)
	}
	if shared.skipped.Add(1) == 1 {
		loud(fmt.Sprintf("\n*** SKIPPING INTEGRATION TESTS: %s\n*** Fix that, or set %s to a folder holding etcd, kube-apiserver and kubectl. With CI=true these tests fail instead. ***\n\n",
			msg, BinEnv))
	}
	t.Skip(msg)
	return nil
}

// isCI reports whether $CI is true: then an integration test fails
// instead of skipping.
func isCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// deadlineOf is when t's test binary times out (go test -timeout, 10 minutes
// by default); zero if it never does.
func deadlineOf(t T) time.Time {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}
	}
	deadline, _ := d.Deadline()
	return deadline
}

// buildFits returns an error naming the command that builds the binaries
// ahead when they must be built (with kube-controller-manager if kcm) and
// the build would not end, with a minute to spare, before deadline.
func buildFits(deadline time.Time, kcm bool) error {
	if deadline.IsZero() || os.Getenv(BinEnv) != "" {
		return nil
	}
	dir, err := cacheFolder()
	if err != nil {
		return nil
	}
	var expected time.Duration
	if len(missingBinaries(dir)) > 0 {
		expected += expectedBuildTime()
	}
	command := "build"
	if kcm {
		command = "build -controller-manager"
		if _, err := os.Stat(filepath.Join(dir, ControllerManagerBinary)); err != nil {
			expected += expectedControllerManagerBuildTime()
		}
	}
	left := time.Until(deadline)
	if expected == 0 || left > expected+time.Minute {
		return nil
	}
	return fmt.Errorf("the control plane's binaries are not built yet, which takes about %.0f min on %d idle cores (longer on busy ones), "+
		"and this test binary times out in %.0f s: build them once with\n\tgo run github.com/kctl-dev/kctl/hack/controlplane %s\n"+
		"or give go test a longer -timeout", expected.Minutes(), runtime.NumCPU(), left.Seconds(), command)
}

func startShared(deadline time.Time) {
	lent := lentCluster()
	if lent != nil {
		shared.c = lent
		shared.lent = true
		return
	}
	shared.c, shared.reaper, shared.err = startCluster(deadline, nil, false)
	shared.up.Store(shared.err == nil)
}

// startCluster builds the binaries if need be and starts a cluster whose
// kube-apiserver also gets apiFlags, with a kube-controller-manager if kcm,
// and a reaper of its own. On error it leaves nothing behind.
func startCluster(deadline time.Time, apiFlags []string, kcm bool) (*Cluster, *Reaper, error) {
	ctx := shared.ctx
	if err := buildFits(deadline, kcm); err != nil {
		return nil, nil, err
	}
	bin, err := Binaries(ctx, terminal())
	if err != nil {
		return nil, nil, err
	}
	if kcm {
		_, err = ControllerManager(ctx, terminal())
	}
	if err != nil {
		return nil, nil, err
	}
	RemoveStale()
	dir, err := os.MkdirTemp("", "kctl-controlplane-")
	if err != nil {
		return nil, nil, err
	}
	reaper, err := StartReaper(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	c := &Cluster{Dir: dir, Bin: bin, Reaper: reaper, APIFlags: apiFlags, ControllerManager: kcm}
	err = os.WriteFile(filepath.Join(dir, "runner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil {
		err = c.Up(ctx)
	}
	if err != nil {
		c.Down()
		os.RemoveAll(dir)
		reaper.Close()
		return nil, nil, err
	}
	return c, reaper, nil
}

// stopShared stops the shared control plane, if it started, and removes its files.
func stopShared() {
	shared.stopped.Do(func() {
		// once.Do waits for a start in progress (ended early by a signal: see
		// RunTests), and makes a later Require start nothing.
		shared.once.Do(func() { shared.err = fmt.Errorf("the tests are over") })
		if shared.c != nil && !shared.lent {
			shared.c.Down()
			os.RemoveAll(shared.c.Dir)
		}
		shared.reaper.Close()
		stopFlagged()
	})
}

// RemoveStale removes the folders of control planes whose process died
// and whose reaper did not remove them (it was killed too, or the machine
// stopped).
func RemoveStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kctl-controlplane-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "runner.pid"))
		pid, _ := strconv.Atoi(string(b))
		if err == nil && !Alive(pid) {
			os.RemoveAll(d)
		}
	}
}

// terminal is where progress goes: the terminal when there is one, since go
// test shows a passing package's output only with -v; else standard error.
var terminal = sync.OnceValue(func() io.Writer {
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		return tty // kept open for the life of the process
	}
	return os.Stderr
})

func loud(msg string) {
	fmt.Fprint(terminal(), msg)
}

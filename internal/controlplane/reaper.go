package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reaperEnv, set to "1" in a process's environment, makes that process a
// reaper (see init): the test binary starts a copy of itself this way.
const reaperEnv = "KCTL_CONTROLPLANE_REAPER"

// init turns a copy of the test binary started by startReaper into the
// reaper before any test runs. Nothing else sets reaperEnv.
func init() {
	if os.Getenv(reaperEnv) == "1" {
		os.Exit(reap(os.Stdin))
	}
}

// Reaper is a second process that removes a control plane's files, and
// kills its processes, once the process that started it is gone, however it
// ended: a SIGKILL, a timeout, os.Exit, a panic. It learns what to clean up
// from lines written to its standard input, a pipe whose only writer is this
// process: when this process dies the kernel closes the pipe, and the
// reaper reads end of file.
//
// It runs in a process group of its own, so that a Ctrl-C in the terminal
// does not reach it, and with no standard output or error, so that go test
// does not wait for it. Its lines are:
//
//	dir PATH   remove PATH (and all it holds) at the end
//	pgid N     kill process group N (SIGKILL) at the end, before removing
//	done N     process group N has been stopped: forget it
//
// Close ends it after a clean stop: the Reaper's methods are safe for
// concurrent use, and do nothing once it is closed.
type Reaper struct {
	mu     sync.Mutex
	w      *os.File // the pipe to the reaper; nil once closed
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartReaper starts a reaper that removes dir at the end. It is a copy of
// this executable, which must import this package (every test binary that
// uses the control plane does).
func StartReaper(dir string) (*Reaper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot start the reaper of %s: %w", dir, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cannot start the reaper of %s: %w", dir, err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperEnv+"=1")
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close() // the reaper holds the read end now
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("cannot start the reaper of %s: %w", dir, err)
	}
	rp := &Reaper{w: w, cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(rp.exited)
	}()
	rp.send("dir", dir)
	return rp, nil
}

// Watch tells the reaper to kill process group pgid at the end.
func (rp *Reaper) Watch(pgid int) {
	rp.send("pgid", strconv.Itoa(pgid))
}

// Forget tells the reaper that process group pgid has stopped.
func (rp *Reaper) Forget(pgid int) {
	rp.send("done", strconv.Itoa(pgid))
}

func (rp *Reaper) send(verb, arg string) {
	if rp == nil {
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.w != nil {
		fmt.Fprintf(rp.w, "%s %s\n", verb, arg)
	}
}

// Close ends the reaper, which cleans up what is left, and waits up to 15 s
// for it to exit.
func (rp *Reaper) Close() {
	if rp == nil {
		return
	}
	rp.mu.Lock()
	w := rp.w
	rp.w = nil
	rp.mu.Unlock()
	if w == nil {
		return
	}
	w.Close()
	select {
	case <-rp.exited:
	case <-time.After(15 * time.Second):
	}
}

// reap is the reaper's main: it reads its lines until end of file, then
// kills the process groups not forgotten, waits up to 10 s for them to be
// gone, and removes the folders. It returns the exit code.
func reap(in io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGQUIT)
	var dirs []string
	groups := map[int]bool{}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		verb, arg, _ := strings.Cut(lines.Text(), " ")
		n, _ := strconv.Atoi(arg)
		switch verb {
		case "dir":
			dirs = append(dirs, arg)
		case "pgid":
			groups[n] = true
		case "done":
			delete(groups, n)
		}
	}
	for pgid := range groups {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pgid := range groups {
		for Alive(pgid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, removeAll(d, deadline))
	}
	if errors.Join(errs...) != nil {
		return 1
	}
	return 0
}

// removeAll removes dir, trying again until deadline while a dying process
// may still be writing in it.
func removeAll(dir string, deadline time.Time) error {
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

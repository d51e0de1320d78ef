package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTick = 100

// proc is a controller under measurement.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc runs bin with args, its output going to logFile.
func startProc(bin, logFile string, args ...string) (*proc, error) {
	return startProcEnv(bin, logFile, nil, args...)
}

// startProcEnv is startProc with extra environment variables (KEY=VALUE).
func startProcEnv(bin, logFile string, extraEnv []string, args ...string) (*proc, error) {
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited returns an error naming the log if the process has ended.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v); see %s:\n%s", filepath.Base(p.cmd.Path), p.err, p.log, tailFile(p.log, 15))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to 15 s, then kills.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuSeconds is the process's user plus system CPU time.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is field 14, stime 15
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTick, nil
}

// rssMB is VmRSS from /proc/PID/status in MB (10^6 bytes).
func rssMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024 / 1e6, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// waitIdle waits until p has used no CPU for quiet (polled every 100 ms), or
// until limit has passed; it reports whether p went idle.
func waitIdle(p *proc, quiet, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	last, err := cpuSeconds(p.pid())
	if err != nil {
		return false, err
	}
	since := time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if err := p.exited(); err != nil {
			return false, err
		}
		c, err := cpuSeconds(p.pid())
		if err != nil {
			return false, err
		}
		if c != last {
			last, since = c, time.Now()
		} else if time.Since(since) >= quiet {
			return true, nil
		}
	}
	return false, nil
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

package controlplane

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// startDying starts cmd in a process group of its own, to be killed by the
// kernel (SIGKILL) when this process dies, whether it returns, panics, calls
// os.Exit or is killed. Pdeathsig fires when the OS thread that started the
// child ends, not the process, so every child is started by one goroutine
// that holds its thread locked and never returns: that thread lives as long
// as the process.
func startDying(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	starterOnce.Do(func() { go starter() })
	done := make(chan error)
	starts <- start{cmd: cmd, done: done}
	return <-done
}

type start struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	starterOnce sync.Once
	starts      = make(chan start)
)

func starter() {
	runtime.LockOSThread() // never unlocked: see startDying
	for s := range starts {
		s.done <- s.cmd.Start()
	}
}

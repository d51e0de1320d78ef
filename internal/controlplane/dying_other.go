//go:build !linux

package controlplane

import (
	"os/exec"
	"syscall"
)

// startDying starts cmd in a process group of its own. Only Linux can have
// the kernel kill it when this process dies (Pdeathsig); elsewhere a process
// killed with SIGKILL leaves it running, and Main's signal handler and Stop
// are all that stop it.
func startDying(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}

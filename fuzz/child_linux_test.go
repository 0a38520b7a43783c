package fuzz_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the child if this process dies first.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

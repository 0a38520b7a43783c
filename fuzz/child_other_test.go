//go:build !linux

package fuzz_test

import "os/exec"

// dieWithParent does nothing where the kernel offers no parent-death
// signal: a child of a test that dies leaks until it finishes its work.
func dieWithParent(cmd *exec.Cmd) {}

// Package tmpfs mounts, for tests of a full disk, a small tmpfs of the
// test's own (mount(2) needs root). Without the right to mount, the test
// is skipped with the reason; under CI (CI set) it fails instead, since a
// full-disk test that CI skips guards nothing.
package tmpfs

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs with the mount options opts ("size=3m") on a new
// temporary directory, returns that directory, and unmounts it when the
// test ends.
func Mount(t testing.TB, opts string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
	if err != nil && os.Getenv("CI") != "" {
		t.Fatalf("cannot mount a tmpfs (%s), which CI needs: %v: %s", opts, err, out)
	}
	if err != nil {
		t.Skipf("cannot mount a tmpfs (%s): %v: %s", opts, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill creates the file path and writes it until its file system is
// full: pages, then the last bytes of the page it holds. It fails the
// test unless the writes end with ENOSPC.
func Fill(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for _, size := range []int{len(buf), 1} {
		for err = nil; err == nil; {
			_, err = f.Write(buf[:size])
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling %s: %v, want ENOSPC", path, err)
		}
	}
}

// Package tmpfs mounts, for tests of a full disk, a small tmpfs of the
// test's own (mount(2) needs root). Without the right to mount, the test
// is skipped with the reason; under CI (CI set) it fails instead, since a
// full-disk test that CI skips guards nothing.
package tmpfs

import (
	"os"
	"os/exec"
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

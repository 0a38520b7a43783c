//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRenameNoReplaceFallback: where renameat2 refuses the flag (a kernel
// without it: ENOSYS; a file system without it, NFS or FUSE: EINVAL) the
// backup is still published by a plain rename, the check before it
// refusing a name that exists; an EEXIST refuses the name, saying so; any
// other failure is returned as it is, without a second rename.
func TestRenameNoReplaceFallback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		errno     unix.Errno
		published bool   // the copy took the name
		says      string // the error's text, when refused
	}{
		{"ENOSYS", unix.ENOSYS, true, ""},
		{"EINVAL", unix.EINVAL, true, ""},
		{"EEXIST", unix.EEXIST, false, "appeared during the copy: rename "},
		{"EXDEV", unix.EXDEV, false, "invalid cross-device link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			old := renameat2
			t.Cleanup(func() { renameat2 = old })
			renameat2 = func(int, string, int, string, uint) error { calls++; return tc.errno }
			dst := filepath.Join(t.TempDir(), "q.bak")
			part := dst + partialSuffix
			require.NoError(t, os.Mkdir(part, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(part, "f"), []byte("copy"), 0o600))

			renamed, err := publishBackup(backupOS{}, part, dst)
			require.Equal(t, 1, calls, "renameat2 is tried once")
			require.Equal(t, tc.published, renamed)
			if tc.published {
				require.NoError(t, err)
				require.FileExists(t, filepath.Join(dst, "f"))
				require.NoDirExists(t, part)
				return
			}
			require.ErrorContains(t, err, tc.says)
			require.NoDirExists(t, dst)
			require.FileExists(t, filepath.Join(part, "f"))
		})
	}
}

// TestRenameNoReplaceFallbackChecks: with the flag refused, a name that
// exists before the rename is still refused by the check, not replaced.
func TestRenameNoReplaceFallbackChecks(t *testing.T) {
	old := renameat2
	t.Cleanup(func() { renameat2 = old })
	renameat2 = func(int, string, int, string, uint) error { return unix.EINVAL }
	dst := filepath.Join(t.TempDir(), "q.bak")
	part := dst + partialSuffix
	require.NoError(t, os.Mkdir(part, 0o700))
	require.NoError(t, os.Mkdir(dst, 0o700)) // empty: rename(2) would replace it

	renamed, err := publishBackup(backupOS{}, part, dst)
	require.False(t, renamed)
	require.EqualError(t, err, dst+" appeared during the copy")
	require.DirExists(t, part)
}

package dirlock_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/dirlock"
)

func TestConflicts(t *testing.T) {
	cases := []struct {
		name         string
		first, other bool // exclusive?
		conflict     bool
	}{
		{"exclusive then exclusive", true, true, true},
		{"exclusive then shared", true, false, true},
		{"shared then exclusive", false, true, true},
		{"shared then shared", false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := dirlock.Acquire(dir, 0o600, c.first)
			require.NoError(t, err)
			l2, err := dirlock.Acquire(dir, 0o600, c.other)
			if c.conflict {
				require.ErrorIs(t, err, dirlock.ErrLocked)
			} else {
				require.NoError(t, err)
				require.NoError(t, l2.Release())
			}
			require.NoError(t, l.Release())
			l3, err := dirlock.Acquire(dir, 0o600, true)
			require.NoError(t, err, "released locks must not linger")
			require.NoError(t, l3.Release())
		})
	}
}

func TestSharedCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.AcquireShared(dir)
	require.NoError(t, err)
	require.Nil(t, l)
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, des)
	require.NoError(t, l.Release())

	w, err := dirlock.Acquire(dir, 0o600, true)
	require.NoError(t, err)
	_, err = dirlock.AcquireShared(dir)
	require.ErrorIs(t, err, dirlock.ErrLocked)
	require.NoError(t, w.Release())
	r, err := dirlock.AcquireShared(dir)
	require.NoError(t, err)
	require.NotNil(t, r)
	require.NoError(t, r.Release())
}

// TestOtherProcess holds the lock in a child process, sees it refused here,
// kills the child and takes the lock: the kernel released it.
func TestOtherProcess(t *testing.T) {
	if dir := os.Getenv("DIRLOCK_CHILD"); dir != "" {
		_, err := dirlock.Acquire(dir, 0o600, true)
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		select {} // hold it until killed
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOtherProcess$")
	cmd.Env = append(os.Environ(), "DIRLOCK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	_, err = dirlock.Acquire(dir, 0o600, true)
	require.ErrorIs(t, err, dirlock.ErrLocked)
	_, err = dirlock.AcquireShared(dir)
	require.ErrorIs(t, err, dirlock.ErrLocked)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	l, err := dirlock.Acquire(dir, 0o600, true)
	require.NoError(t, err)
	require.NoError(t, l.Release())
	require.FileExists(t, filepath.Join(dir, dirlock.Name))
}

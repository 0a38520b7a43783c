package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRepairRelativeDirDefaultBackup: walq repair run with DIR "." from
// inside the queue directory, or ".." from its log directory, backs the
// directory up next to it under the default name and repairs it.
func TestRepairRelativeDirDefaultBackup(t *testing.T) {
	for _, tc := range []struct{ arg, sub string }{{".", ""}, {"..", "log"}} {
		t.Run(tc.arg, func(t *testing.T) {
			dir := tornQueue(t)
			cmd := exec.Command(walqBin, "repair", tc.arg)
			cmd.Dir = filepath.Join(dir, tc.sub)
			cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			require.NoError(t, err, "stdout %s\nstderr %s", out.String(), errOut.String())
			require.Contains(t, out.String(), "result: repaired; verify finds it clean")
			backups, err := filepath.Glob(dir + ".bak-*")
			require.NoError(t, err)
			require.Len(t, backups, 1, "the default backup is next to the directory")
			require.DirExists(t, filepath.Join(backups[0], "log"))
			mustWalq(t, 0, "", "verify", dir)
		})
	}
}

// TestRepairBackupOddPaths: a backup path that is the directory itself,
// lies inside it by way of "..", or runs through a symbolic link loop is
// refused, and nothing is made.
func TestRepairBackupOddPaths(t *testing.T) {
	dir := tornQueue(t)
	loop := filepath.Join(filepath.Dir(dir), "loop")
	require.NoError(t, os.Symlink(loop, loop))
	for _, b := range []string{dir, dir + "/", filepath.Join(dir, "log", "..", "x"), filepath.Join(loop, "x"), loop} {
		r := walq(t, "", "repair", "--backup", b, dir)
		require.NotEqual(t, 0, r.code, "backup %s: %s", b, r.stdout)
	}
	require.NoDirExists(t, filepath.Join(dir, "x"))
	mustWalq(t, 7, "", "verify", dir) // still torn: nothing was changed
}

// TestRepairPrintsBackupAsMade: a --backup path given with a trailing
// slash or a "." in it is copied to the path it names, and repair prints
// that path, in its text and in its JSON, where the copy can be found by
// the printed name, not the one typed.
func TestRepairPrintsBackupAsMade(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			dir := tornQueue(t)
			made := filepath.Join(filepath.Dir(dir), "bak")
			typed := filepath.Dir(dir) + "/./bak/"
			args := []string{"repair", "--backup", typed, dir}
			if asJSON {
				args = append(args[:1], append([]string{"--json"}, args[1:]...)...)
			}
			r := mustWalq(t, 0, "", args...)
			require.DirExists(t, filepath.Join(made, "log"))
			if !asJSON {
				require.Regexp(t, `(?m)^backup: copied .* to `+regexp.QuoteMeta(made)+`$`, r.stdout)
				return
			}
			var got struct{ Backup string }
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
			require.Equal(t, made, got.Backup)
		})
	}
}

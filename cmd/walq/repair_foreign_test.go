package main_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestForeignEndFile: a tidwall/wal END file in the log directory, which
// walq never writes and no repair changes, is corrupt to verify, which
// names it and does not send the operator to 'walq repair'; repair
// refuses it, naming it, and makes no backup; once it is moved out the
// queue is clean with every message.
func TestForeignEndFile(t *testing.T) {
	for _, suffix := range []string{".END", ".START"} {
		t.Run(suffix, func(t *testing.T) { foreignFile(t, suffix) })
	}
}

// foreignFile runs TestForeignEndFile with an empty file named after the
// first segment plus suffix (a START file without a valid entry is no
// truncation of walq's either).
func foreignFile(t *testing.T, suffix string) {
	dir := cleanQueue(t, 5)
	end := segments(t, dir)[0] + suffix
	require.NoError(t, os.WriteFile(end, nil, 0o600))

	r := mustWalq(t, 2, "", "verify", dir)
	require.Contains(t, r.stdout, filepath.Base(end))
	require.Contains(t, r.stdout, "move it out of the log directory")
	require.NotContains(t, r.stdout+r.stderr, "walq repair")

	r = mustWalq(t, 2, "", "repair", dir)
	require.Contains(t, r.stdout+r.stderr, filepath.Base(end))
	require.NotContains(t, r.stdout+r.stderr, "backup:")
	require.Contains(t, r.stderr, "move the file named out", "repair's hint")
	baks, err := filepath.Glob(dir + ".bak-*")
	require.NoError(t, err)
	require.Empty(t, baks, "repair made a backup of a directory it cannot change")
	r = mustWalq(t, 2, "", "verify", "--json", dir)
	require.Contains(t, r.stdout, filepath.Base(end))

	r = mustWalq(t, 2, "", "stats", dir)
	require.Contains(t, r.stderr, "move the file named out", "the hint of a command that opens it")
	require.NotContains(t, r.stderr, "walq repair "+dir)

	require.NoError(t, os.Remove(end))
	mustWalq(t, 0, "", "verify", dir)
	r = mustWalq(t, 0, "", "stats", dir)
	require.Regexp(t, `ready\s+5\b`, r.stdout)
}

// TestFrontFromLaterMoment: walq's own NAME.FRONT truncation marker whose
// truncation would remove records the snapshot needs (a directory put back
// from copies made at different times) is corrupt to verify, which names
// it and says to move it out rather than repair; repair refuses it, naming
// it, with no backup and no file changed; once it is moved out the queue is
// clean with every message.
func TestFrontFromLaterMoment(t *testing.T) {
	dir := cleanQueue(t, 200)
	segs := segments(t, dir)
	require.Greater(t, len(segs), 3, "the test needs four segments at least")
	marker := segs[2] + ".FRONT"
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	before := dirFiles(t, dir)

	r := mustWalq(t, 2, "", "verify", dir)
	require.Contains(t, r.stdout, "marker    ")
	require.Contains(t, r.stdout, "move "+filepath.Base(marker)+" out of the log directory")
	require.Contains(t, r.stdout, "result: corrupt; a truncation marker from a later moment")
	require.NotContains(t, r.stdout+r.stderr, "walq repair "+dir)
	r = mustWalq(t, 2, "", "verify", "--json", dir)
	require.Contains(t, r.stdout, `"front":"queue: corrupt: open log: `)
	require.Contains(t, r.stdout, filepath.Base(marker))

	r = mustWalq(t, 2, "", "repair", dir)
	require.Contains(t, r.stdout+r.stderr, "move "+filepath.Base(marker)+" out of the log directory")
	require.NotContains(t, r.stdout+r.stderr, "backup:")
	baks, err := filepath.Glob(dir + ".bak-*")
	require.NoError(t, err)
	require.Empty(t, baks, "repair made a backup of a directory it refuses")
	require.Equal(t, before, dirFiles(t, dir), "a refused repair changed the directory")

	// The commands that open it, read-only (stats) or not (dequeue), give
	// the open's error and a hint that agrees: move the marker out, not
	// repair, which refuses it.
	for _, args := range [][]string{{"stats", dir}, {"stats", "--json", dir}, {"dequeue", dir}} {
		r = mustWalq(t, 2, "", args...)
		require.Contains(t, r.stderr, "move "+filepath.Base(marker)+" out of the log directory", args)
		require.NotContains(t, r.stderr, "a segment is missing", args)
		require.NotContains(t, r.stderr, "'walq repair "+dir+"' to skip the damage", args)
		require.Contains(t, r.stderr, "hint: ", args)
		require.Empty(t, r.stdout, args)
	}
	require.Equal(t, before, dirFiles(t, dir), "a refused open changed the directory")

	require.NoError(t, os.Remove(marker))
	mustWalq(t, 0, "", "verify", dir)
	r = mustWalq(t, 0, "", "stats", dir)
	require.Regexp(t, `ready\s+200\b`, r.stdout)
}

// dirFiles returns the name and bytes of every file under dir but the
// lock file.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	}))
	return out
}

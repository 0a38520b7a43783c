package main_test

import (
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

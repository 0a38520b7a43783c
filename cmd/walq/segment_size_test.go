package main_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// boundaryRollQueue returns a crashed queue directory (fixtureOptions'
// SegmentSize, 4096) whose last roll a power loss tore on an entry
// boundary: the sealed segment lost its last entry whole, the roll's new
// segment holds nothing. Only the writer's segment size tells this from a
// missing segment after a whole one.
func boundaryRollQueue(t *testing.T) string {
	t.Helper()
	dir := crashedQueue(t, 120)
	segs := segments(t, dir)
	require.GreaterOrEqual(t, len(segs), 2)
	sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
	b, err := os.ReadFile(sealed)
	require.NoError(t, err)
	last := 0 // offset of the last frame
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		require.Positive(t, k)
		last, off = off, off+k+int(n)
	}
	require.NoError(t, os.Truncate(sealed, int64(last)))
	require.NoError(t, os.Truncate(tail, 0))
	return dir
}

// TestSegmentSizeFlag: verify and repair, not given the segment size,
// cannot tell a roll torn on an entry boundary from missing segments, and
// say which flag tells; given --segment-size, verify reports the torn roll
// (repairable) and repair cuts it, after which the queue is clean.
func TestSegmentSizeFlag(t *testing.T) {
	dir := boundaryRollQueue(t)
	r := mustWalq(t, 2, "", "verify", dir)
	require.Contains(t, r.stdout, "--segment-size", "verify's advice names the flag")
	require.NotContains(t, r.stdout+r.stderr, "'walq repair "+dir+"'", "verify advises a repair that refuses")

	r = mustWalq(t, 2, "", "repair", dir)
	require.Contains(t, r.stdout+r.stderr, "--segment-size", "repair's advice names the flag")
	require.NotContains(t, r.stdout, "backup:")
	baks, err := filepath.Glob(dir + ".bak-*")
	require.NoError(t, err)
	require.Empty(t, baks, "repair made a backup of a directory it refused")

	r = mustWalq(t, 7, "", "verify", "--segment-size", "4096", dir)
	require.Contains(t, r.stdout, "segment roll")
	require.Contains(t, r.stdout, "result: torn tail, repairable")
	r = mustWalq(t, 0, "", "repair", "--segment-size", "4KiB", dir)
	require.Contains(t, r.stdout, "cut torn tail: ")
	mustWalq(t, 0, "", "verify", dir)
	mustWalq(t, 0, "", "stats", dir)
}

// TestSegmentSizeFlagValues: --segment-size takes bytes, with or without
// a binary unit, and refuses what is no size or below 4096 as a usage
// error, before it reads anything.
func TestSegmentSizeFlagValues(t *testing.T) {
	dir := cleanQueue(t, 3)
	for _, v := range []string{"4096", "4KiB", "4K", "1MiB", "1M", "1GiB"} {
		mustWalq(t, 0, "", "verify", "--segment-size", v, dir)
	}
	for _, v := range []string{"lots", "-4096", "1.5KiB", "100", "0", "4XiB"} {
		r := mustWalq(t, 1, "", "verify", "--segment-size", v, dir)
		require.Contains(t, r.stderr, "segment-size", v)
		r = mustWalq(t, 1, "", "repair", "--segment-size", v, dir)
		require.Contains(t, r.stderr, "segment-size", v)
	}
}

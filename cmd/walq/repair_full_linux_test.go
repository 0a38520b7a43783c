//go:build linux

package main_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/tmpfs"
	"github.com/walq/walq/queue"
)

// TestRepairFullDisk: walq repair of a torn queue on a full disk fails at
// its backup, before anything changes: it exits 1, says the disk is full
// and what to do, leaves the queue directory as it was (verify still finds
// the torn tail) and no partial backup taking the space. Given a backup
// on another disk, the salvage fails for want of room for its snapshot
// and leaves a directory that opens; once space is freed, repair leaves
// every message ready.
func TestRepairFullDisk(t *testing.T) {
	mnt := tmpfs.Mount(t, "size=1m")
	dir := filepath.Join(mnt, "q")
	copyTree(t, tornQueue(t), dir)
	filler := filepath.Join(mnt, "filler")
	tmpfs.Fill(t, filler)
	before := treeDigest(t, dir)

	r := mustWalq(t, 1, "", "repair", dir)
	require.Contains(t, r.stderr, "no space left on device")
	require.Contains(t, r.stderr, dir+" was not changed")
	require.Contains(t, r.stderr, "--backup", "it names the way out: a backup on another disk")
	require.Equal(t, before, treeDigest(t, dir), "the directory is unchanged")
	backups, err := filepath.Glob(dir + ".bak-*")
	require.NoError(t, err)
	require.Empty(t, backups, "the partial backup is removed")
	mustWalq(t, 7, "", "verify", dir) // still torn: nothing was changed

	// A backup on another disk, as the message says, is made; the salvage
	// then needs room for its snapshot and fails with ENOSPC too.
	elsewhere := filepath.Join(t.TempDir(), "saved")
	r = mustWalq(t, 1, "", "repair", "--backup", elsewhere, dir)
	require.Contains(t, r.stderr, "no space left on device")
	require.Contains(t, r.stderr, "free space on it and run repair again")
	require.Contains(t, r.stderr, "(the backup is "+elsewhere+")")
	require.Equal(t, before, treeDigest(t, elsewhere), "the backup is the directory before the repair")
	// What it wrote before it failed (the torn tail cut, the crash's
	// leases ended) leaves a directory that opens: clean, or torn still.
	v := walq(t, "", "verify", dir)
	require.Contains(t, []int{0, 7}, v.code, "verify after the failed salvage:\n%s", v.stdout)
	tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NoError(t, err)
	require.Empty(t, tmps, "the snapshot that did not fit is not left behind")

	// Once space is freed, repair succeeds and every message is there.
	require.NoError(t, os.Remove(filler))
	r = mustWalq(t, 0, "", "repair", dir)
	mustWalq(t, 0, "", "verify", dir)
	require.EqualValues(t, 40, stats(t, dir).Ready)
}

// TestRepairFullDiskSalvageLeft: what a salvage that failed on the full
// disk leaves (its backup made elsewhere) is a queue that loses nothing
// and brings back nothing acked: opened once space is freed, it delivers
// every message not acked before the crash once, with its payload, and
// none that was; a repair run again then finishes with those ready.
func TestRepairFullDiskSalvageLeft(t *testing.T) {
	mnt := tmpfs.Mount(t, "size=1m")
	dir := filepath.Join(mnt, "q")
	payload := func(i int) string { return fmt.Sprintf("payload %03d %s", i, strings.Repeat("z", 80)) }

	// A process enqueues 40, acks the first 10, leases 2 and dies; the
	// last entry (the second lease) is torn.
	src := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(src, fixtureOptions())
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	ctx := context.Background()
	for i := range 40 {
		_, err := q.Enqueue(ctx, []byte(payload(i)), queue.WithID(fmt.Sprintf("msg-%03d", i)))
		require.NoError(t, err)
	}
	for i := range 12 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("msg-%03d", i), m.ID)
		if i < 10 {
			require.NoError(t, m.Ack())
		}
	}
	copyTree(t, src, dir) // what a kill -9 leaves
	last := segments(t, dir)[len(segments(t, dir))-1]
	ends, _ := frames(t, last)
	require.NotEmpty(t, ends)
	require.NoError(t, os.Truncate(last, ends[len(ends)-1]-5))
	filler := filepath.Join(mnt, "filler")
	tmpfs.Fill(t, filler)

	elsewhere := filepath.Join(t.TempDir(), "saved")
	r := mustWalq(t, 1, "", "repair", "--backup", elsewhere, dir)
	require.Contains(t, r.stderr, "no space left on device")
	tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NoError(t, err)
	require.Empty(t, tmps, "the snapshot that did not fit is not left behind")

	// Freed, the queue as the failed salvage left it (a copy, opened by
	// the application).
	require.NoError(t, os.Remove(filler))
	probe := filepath.Join(t.TempDir(), "q")
	copyTree(t, dir, probe)
	p, err := queue.Open(probe, fixtureOptions())
	require.NoError(t, err, "the queue the failed salvage left opens")
	seen := map[string]int{}
	for {
		m, err := p.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		seen[m.ID]++
		var i int
		_, err = fmt.Sscanf(m.ID, "msg-%03d", &i)
		require.NoError(t, err)
		require.GreaterOrEqual(t, i, 10, "%s delivered after its ack returned nil", m.ID)
		require.Equal(t, payload(i), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	require.NoError(t, p.Close())
	for i := 10; i < 40; i++ {
		require.Equal(t, 1, seen[fmt.Sprintf("msg-%03d", i)], "msg-%03d delivered %d times", i, seen[fmt.Sprintf("msg-%03d", i)])
	}
	require.Len(t, seen, 30)

	// And the repair, run again, finishes.
	mustWalq(t, 0, "", "repair", dir)
	mustWalq(t, 0, "", "verify", dir)
	require.EqualValues(t, 30, stats(t, dir).Ready)
}

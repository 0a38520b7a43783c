//go:build linux

package queue_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestFullDiskDrainAfterFreeing: the backlog of a queue that filled its
// disk (SyncAlways) drains once the operator frees a quarter of a
// segment, less than the zeros the log writes ahead of its tail, with a
// Compact every 100 acks to free the drained segments; new enqueues then
// fit again. Every message whose Enqueue returned nil comes back, with its
// payload, once; the one whose Enqueue failed may come back too (its
// record may have been written).
func TestFullDiskDrainAfterFreeing(t *testing.T) {
	mnt := mountTmpfs(t, "size=3m")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 128<<10), 0o600))
	dir := filepath.Join(mnt, "q")
	ctx := context.Background()
	payload := func(i int) string { return fmt.Sprintf("%06d-%0994d", i, i) }

	// Fill the disk.
	o := &queue.Options{SegmentSize: 512 << 10}
	q := open(t, dir, o)
	t.Cleanup(func() { _ = q.Close() }) // before the unmount: a failed check leaves it open
	n := 0
	var err error
	for ; ; n++ {
		if _, err = q.Enqueue(ctx, []byte(payload(n))); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Error(t, q.Close())

	// Free the filler and drain.
	require.NoError(t, os.Remove(filler))
	q = open(t, dir, o)
	for i := 0; i < n; i++ {
		m, err := q.TryDequeue()
		require.NoError(t, err, "message %d of %d", i, n)
		require.Equal(t, payload(i), string(m.Payload))
		require.NoError(t, m.Ack(), "ack of message %d of %d", i, n)
		if i%100 == 99 { // drained segments make room
			require.NoError(t, q.Compact(), "compaction after message %d of %d", i, n)
		}
	}
	if m, err := q.TryDequeue(); err == nil { // the failed enqueue, written
		require.Equal(t, payload(n), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	requireEmpty(t, q)

	// The compaction frees the log; new enqueues fit again.
	require.NoError(t, q.Compact())
	for i := 0; i < n/2; i++ {
		enqueue(t, q, payload(n+1+i))
	}
	require.NoError(t, q.Close())
	q = open(t, dir, o)
	for i := 0; i < n/2; i++ {
		m := tryDequeue(t, q)
		require.Equal(t, payload(n+1+i), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	requireEmpty(t, q)
	require.NoError(t, q.Close())
}

// mountTmpfs mounts a tmpfs with opts for the test, or skips the test
// with the reason when it cannot (mount(2) needs root).
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
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

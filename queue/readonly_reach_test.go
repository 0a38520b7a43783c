package queue_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestReadOnlyLogEndsBeforeSnapshot: a log that ends before its snapshot's
// LSN lost records that were synced (the snapshot is written only once
// the log is durable up to it), which is damage, never a torn write. The
// writable open refuses it with ErrCorrupt; a plain read-only open of the
// same files must refuse it too, rather than open it as a torn tail and
// show a queue that counts the messages whose records were lost but
// cannot list or read them.
func TestReadOnlyLogEndsBeforeSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  int64 // bytes cut off the end of the last segment
	}{
		{"torn inside the last entry", 150},
		{"cut through two entries", 260},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{SegmentSize: 4096})
			for i := range 10 {
				enqueue(t, q, fmt.Sprintf("%03d%s", i, strings.Repeat("x", 50)))
			}
			require.NoError(t, q.Compact())
			require.NoError(t, q.Close())
			segs := segments(t, dir)
			last := segs[len(segs)-1]
			fi, err := os.Stat(last)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(last, fi.Size()-tc.cut))

			_, err = queue.Open(dir, &queue.Options{SegmentSize: 4096})
			require.True(t, errors.Is(err, queue.ErrCorrupt), "writable open: %v", err)
			ro, err := queue.Open(dir, &queue.Options{ReadOnly: true, SegmentSize: 4096})
			if err == nil {
				ms, berr := ro.Browse(queue.StateReady, 0, 100)
				desc := fmt.Sprintf("read-only open succeeded: Stats().Ready %d, Browse lists %d (%v), Recovery().Log.Torn %v",
					ro.Stats().Ready, len(ms), berr, ro.Recovery().Log.Torn)
				require.NoError(t, ro.Close())
				t.Fatal(desc)
			}
			require.True(t, errors.Is(err, queue.ErrCorrupt), "read-only open: %v", err)
			require.Contains(t, err.Error(), "records were lost")
		})
	}
}

// TestReadOnlyLostFrontSegment: with the log's first segment gone, which
// the snapshot's messages need, the writable open refuses the directory
// (ErrCorrupt: a segment is missing); a plain read-only open of the same
// files must refuse it too, rather than show a queue that counts messages
// whose records are gone.
func TestReadOnlyLostFrontSegment(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096})
	for i := range 80 {
		enqueue(t, q, fmt.Sprintf("%03d%s", i, strings.Repeat("x", 100)))
	}
	require.NoError(t, q.Close())
	segs := segments(t, dir)
	require.Greater(t, len(segs), 2)
	require.NoError(t, os.Remove(segs[0]))

	_, err := queue.Open(dir, &queue.Options{SegmentSize: 4096})
	require.True(t, errors.Is(err, queue.ErrCorrupt), "writable open: %v", err)
	ro, err := queue.Open(dir, &queue.Options{ReadOnly: true, SegmentSize: 4096})
	if err == nil {
		ms, berr := ro.Browse(queue.StateReady, 0, 100)
		desc := fmt.Sprintf("read-only open succeeded: Stats().Ready %d, Browse lists %d (%v)", ro.Stats().Ready, len(ms), berr)
		require.NoError(t, ro.Close())
		t.Fatal(desc)
	}
	require.True(t, errors.Is(err, queue.ErrCorrupt), "read-only open: %v", err)
	require.Contains(t, err.Error(), "a segment is missing")
}

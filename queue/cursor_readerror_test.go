package queue_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A read error at the cursor (EIO on the segment of a message never
// delivered) is neither the end of the log nor damage: the delivery
// returns it, not ErrEmpty nor ErrCorrupt, the log stays healthy, and
// once the disk reads again the message is delivered, in order.
func TestDequeueReadErrorAtCursor(t *testing.T) {
	fs := &readErrorFS{}
	dir := t.TempDir()
	o := &queue.Options{FS: fs, SegmentSize: 4096}
	q := open(t, dir, o)
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("%03d|%s", i, strings.Repeat("x", 200)))
		enqueue(t, q, want[i])
	}
	require.Greater(t, len(segments(t, dir)), 2, "the first messages lie in sealed segments")
	require.NoError(t, q.Close())
	q = open(t, dir, o) // a cursor that has read nothing yet
	defer q.Close()

	fs.failReads.Store(1 << 40)
	_, err := q.TryDequeue()
	require.ErrorIs(t, err, syscall.EIO, "the read error, not the end of the log")
	require.NotErrorIs(t, err, queue.ErrCorrupt, "an EIO is not damage")
	fs.failReads.Store(0)
	want = append(want, "after") // a failed read does not poison the log
	enqueue(t, q, "after")
	for _, p := range want {
		m := tryDequeue(t, q)
		require.Equal(t, p, string(m.Payload))
		require.NoError(t, m.Ack())
	}
}

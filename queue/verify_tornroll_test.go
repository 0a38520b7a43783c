package queue_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestVerifyTornRoll: a power loss during a segment roll can keep the new,
// empty segment and tear the sealed one's last entry (junk where its
// unsynced bytes were). Open cuts that as a torn tail one segment back;
// Verify, which says a torn tail is repairable (Check.Log.Torn, nil
// error) and returns ErrCorrupt only where Open would, must say the same
// of it, not report a damaged region and send the user to 'walq repair'.
func TestVerifyTornRoll(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096})
	for i := 0; i < 120; i++ {
		enqueue(t, q, fmt.Sprintf("message %03d", i))
	}
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	segs := segments(t, img)
	require.GreaterOrEqual(t, len(segs), 2)
	sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
	b, err := os.ReadFile(sealed)
	require.NoError(t, err)
	for i := len(b) - 40; i < len(b); i++ {
		b[i] = byte(i*7 + 3) // the last entry's unsynced bytes, junk
	}
	require.NoError(t, os.WriteFile(sealed, b, 0o600))
	require.NoError(t, os.Truncate(tail, 0)) // the roll's new segment, nothing in it

	check, verr := queue.Verify(img)
	opened := crashImage(t, img)
	q2 := open(t, opened, &queue.Options{SegmentSize: 4096})
	torn := q2.Recovery().Log.Torn
	require.NoError(t, q2.Close())
	require.NotNil(t, torn, "Open repairs the torn roll")
	require.NoError(t, verr, "Verify of a state Open repairs by itself")
	require.NotNil(t, check.Log.Torn, "Verify reports the torn roll")
	require.Empty(t, check.Log.Salvaged)
}

package queue_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// rollSegmentSize is the SegmentSize of the queues whose torn rolls the
// images below hold: small, so that 120 messages fill several segments.
const rollSegmentSize = 4096

// boundaryRollImage returns a copy of a queue directory that a power loss
// during a segment roll left with the new segment empty and the sealed
// segment's last entry lost whole: a roll torn on an entry boundary. The
// queue was written with SegmentSize rollSegmentSize; only that size
// tells this state from a missing segment after a whole one.
func boundaryRollImage(t *testing.T) string {
	t.Helper()
	return tornRollImage(t, func(b []byte) []byte {
		last := 0 // offset of the last frame
		for off := 0; off < len(b); {
			n, k := binary.Uvarint(b[off:])
			require.Positive(t, k)
			last, off = off, off+k+int(n)
		}
		return b[:last]
	})
}

// junkRollImage returns a copy of a queue directory that a power loss
// during a segment roll left with the new segment empty and the sealed
// segment's last entry torn: junk where its unsynced bytes were.
func junkRollImage(t *testing.T) string {
	t.Helper()
	return tornRollImage(t, func(b []byte) []byte {
		for i := len(b) - 40; i < len(b); i++ {
			b[i] = byte(i*7 + 3)
		}
		return b
	})
}

// tornRollImage writes 120 messages to a queue of SegmentSize
// rollSegmentSize, copies its directory, makes tear of the copy's last
// sealed segment and empties its tail, and returns the copy.
func tornRollImage(t *testing.T, tear func(sealed []byte) []byte) string {
	t.Helper()
	q := open(t, t.TempDir(), &queue.Options{SegmentSize: rollSegmentSize})
	for i := 0; i < 120; i++ {
		enqueue(t, q, fmt.Sprintf("message %03d", i))
	}
	img := crashImage(t, q.Dir())
	require.NoError(t, q.Close())
	segs := segments(t, img)
	require.GreaterOrEqual(t, len(segs), 2)
	sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
	b, err := os.ReadFile(sealed)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(sealed, tear(b), 0o600))
	require.NoError(t, os.Truncate(tail, 0)) // the roll's new segment, nothing in it
	return img
}

package queue_test

import (
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
	img := junkRollImage(t)
	check, verr := queue.Verify(img, nil)
	opened := crashImage(t, img)
	q2 := open(t, opened, &queue.Options{SegmentSize: rollSegmentSize})
	torn := q2.Recovery().Log.Torn
	require.NoError(t, q2.Close())
	require.NotNil(t, torn, "Open repairs the torn roll")
	require.NoError(t, verr, "Verify of a state Open repairs by itself")
	require.NotNil(t, check.Log.Torn, "Verify reports the torn roll")
	require.Empty(t, check.Log.Salvaged)
}

package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// Recovery.Dropped names only the messages the index held (delivered,
// delayed or dead): a never-delivered message whose enqueue record was
// lost is not in it, as nothing left holds its id, nor is one cut with
// the damaged segment's end. Their Seqs are among the LSNs the repair
// reports lost, they are not counted, and they are never delivered. The
// preview shows the same.
func TestSalvageDroppedNamesIndexedOnly(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	q, err := Open(dir, &Options{SegmentSize: 1 << 20, Clock: clock, manualCompact: true})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = q.Enqueue(ctx, []byte("payload of N-MARK"), WithID("N")) // never delivered: at the cursor, not indexed
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("payload of D-MARK"), WithID("D"), WithDelay(time.Hour)) // delayed: indexed
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("payload of K"), WithID("K")) // intact, but after the damage in the last segment
	require.NoError(t, err)
	require.NoError(t, q.Close())
	loseRecords(t, dir, "N-MARK", "D-MARK")

	shown := previewDropped(t, dir, clock)
	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []Lost{{Seq: 2, ID: "D"}}, rep.Recovery.Dropped, "Dropped names the indexed message, not the never-delivered ones")
	require.Equal(t, rep.Recovery.Dropped, shown)
	lost := rep.LostLSNs()
	require.NotEmpty(t, lost)
	require.Equal(t, uint64(1), lost[0][0], "the LSNs lost start at N's Seq: %v", lost)
	require.True(t, lost[0][1] == 0 || lost[0][1] >= 3, "the LSNs lost reach K's Seq (3): %v", lost)

	q, err = Open(dir, &Options{Clock: clock})
	require.NoError(t, err)
	defer q.Close()
	st := q.Stats()
	require.Equal(t, [3]int64{0, 0, 0}, [3]int64{st.Ready, st.Delayed, st.Dead}, "nothing is counted")
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, ErrEmpty)
}

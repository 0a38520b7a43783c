package queue

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSalvageCutLeaseReceiptRefused: a salvage that cuts the log's end
// gives the cut records' LSNs to new records, as a power loss does. The
// holder of a delivery whose lease record was cut, settling its receipt
// after the message was delivered again under the very same lease LSN,
// is refused (ErrLeaseLost: its delivery time is not the new one's) and
// the new delivery stays its consumer's to ack.
func TestSalvageCutLeaseReceiptRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := Open(dir, &Options{manualCompact: true})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("payload of A"))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("DAMAGED|payload of B"))
	require.NoError(t, err)
	for range 10 {
		_, err = q.Enqueue(ctx, []byte("filler"))
		require.NoError(t, err)
	}
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "payload of A", string(m.Payload))
	stale := m.Receipt
	_, err = q.Enqueue(ctx, []byte("payload of C"))
	require.NoError(t, err)
	img := copyDir(t, dir) // what a kill -9 leaves
	require.NoError(t, q.Close())

	segs, err := filepath.Glob(filepath.Join(img, "log", "0*"))
	require.NoError(t, err)
	flipMark(t, segs[len(segs)-1], "DAMAGED|")
	_, err = Open(img, nil)
	require.ErrorIs(t, err, ErrCorrupt, "damage before valid entries is not a torn tail")

	q, err = Open(img, &Options{Salvage: true, manualCompact: true})
	require.NoError(t, err)
	defer q.Close()
	require.NotEmpty(t, q.Recovery().Log.Salvaged)
	// B's enqueue and everything after it are cut: new records take their
	// LSNs, and A's next delivery takes the LSN its cut lease had.
	require.Less(t, q.log.LastLSN()+1, stale.Lease)
	for q.log.LastLSN()+1 < stale.Lease {
		_, err = q.Enqueue(ctx, []byte("payload of D"))
		require.NoError(t, err)
	}
	again, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "payload of A", string(again.Payload))
	require.Equal(t, stale.Seq, again.Receipt.Seq)
	require.Equal(t, stale.Lease, again.Receipt.Lease, "the cut lease's LSN is given out again")
	require.ErrorIs(t, q.Ack(stale), ErrLeaseLost)
	require.NoError(t, again.Ack())
}

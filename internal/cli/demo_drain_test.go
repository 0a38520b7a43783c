package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// A drain that meets a damaged message acks the messages the same batch
// returned beside it before it reports the error, instead of leaving
// them leased to no one.
func TestDrainAcksWhatItGotBesideDamage(t *testing.T) {
	o := queue.Options{SegmentSize: 4096}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q, err := queue.Open(dir, &o)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	pad := string(bytes.Repeat([]byte("p"), 600))
	for i := range 8 {
		_, err := q.Enqueue(ctx, []byte(fmt.Sprint("f", i, "|", pad)))
		require.NoError(t, err)
	}
	a, err := q.Enqueue(ctx, []byte("A|"+pad)) // in the second segment
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, 9) // delivered once, so the next delivery reads the log
	require.NoError(t, err)
	require.Len(t, ms, 9)
	require.NoError(t, ms.Nack(0))
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 1)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	i := bytes.Index(b, []byte("f0|"))
	require.GreaterOrEqual(t, i, 0)
	b[i] ^= 0x20
	require.NoError(t, os.WriteFile(segs[0], b, 0o644))

	_, err = (&demo{}).drain(q)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorIs(t, q.AckID(a), queue.ErrNotFound, "A, returned beside the damage, was acked by the drain")
}

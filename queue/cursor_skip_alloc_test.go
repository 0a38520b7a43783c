package queue

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCursorSkipsDelayedWithoutStrings: the cursor passes over the delayed
// enqueues it reads (the table owns them) without making their IDs into
// strings, so a delivery behind many delayed messages costs allocations
// for what it delivers only. Before, each delayed record skipped cost one.
func TestCursorSkipsDelayedWithoutStrings(t *testing.T) {
	const delayed = 4000
	ctx := context.Background()
	q, err := Open(t.TempDir(), &Options{Sync: SyncNever})
	require.NoError(t, err)
	defer q.Close()
	for range delayed {
		_, err := q.Enqueue(ctx, []byte("later"), WithDelay(time.Hour))
		require.NoError(t, err)
	}
	id, err := q.Enqueue(ctx, []byte("now"))
	require.NoError(t, err)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := q.TryDequeue()
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.Equal(t, []byte("now"), m.Payload)
	// The committer's and the housekeeper's allocations meanwhile count
	// too: a bound far below one per delayed record, far above those.
	require.Less(t, after.Mallocs-before.Mallocs, uint64(delayed/4),
		"allocations of one delivery behind %d delayed messages", delayed)
}

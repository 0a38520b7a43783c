package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDiskBoundInMixedRun runs thousands of operations (enqueues, acks,
// nacks with and without delay, dead letters, purges, leases left to run
// out) and checks, every few hundred operations and at the end, that the
// log holds at most what the documentation promises: about twice the live
// bytes plus two segments, with compaction left to the queue itself.
func TestDiskBoundInMixedRun(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	clock := newFakeClock()
	const seg = 64 << 10
	q := open(t, t.TempDir(), &queue.Options{SegmentSize: seg, Sync: queue.SyncNever, MaxDeliveries: 3,
		AckTimeout: 10 * time.Second, Clock: clock})
	defer q.Close()
	ctx := context.Background()
	worst := 0.0
	for op := 0; op < 30000; op++ {
		switch r := rng.IntN(100); {
		case r < 40:
			_, err := q.Enqueue(ctx, []byte(strings.Repeat("m", 50+rng.IntN(400))))
			require.NoError(t, err)
		case r < 90:
			m, err := q.TryDequeue()
			if err == queue.ErrEmpty {
				continue
			}
			require.NoError(t, err)
			switch k := rng.IntN(10); {
			case k < 6:
				require.NoError(t, m.Ack())
			case k < 8:
				require.NoError(t, m.Nack(time.Duration(rng.IntN(3))*time.Second))
			case k < 9:
				require.NoError(t, m.DeadLetter("test"))
			} // else: the lease runs out
		case r < 93:
			clock.Advance(time.Second)
		default:
			if ds, err := q.DeadLetters(0, 5); err == nil && len(ds) > 0 && rng.IntN(2) == 0 {
				require.NoError(t, q.PurgeDead(ds[0].ID))
			}
		}
		if op%500 == 499 {
			worst = max(worst, checkBound(t, q, seg, fmt.Sprintf("after %d operations", op+1)))
		}
	}
	t.Logf("worst log/bound ratio %.2f", worst)
}

// checkBound compacts (waiting for a background pass that may be
// running, then doing a whole pass of its own), checks the log against
// twice the live bytes plus two segments, and returns the ratio of the
// two.
func checkBound(t *testing.T, q *queue.Queue, seg int64, when string) float64 {
	t.Helper()
	require.NoError(t, q.Compact())
	st := q.Stats()
	bound := 2*st.LiveBytes + 2*seg
	t.Logf("%s: log %d bytes, live %d, bound %d, %d segments", when, st.LogBytes, st.LiveBytes, bound, len(st.Segments))
	require.LessOrEqual(t, st.LogBytes, bound+seg, "%s: the log holds %d bytes for %d live bytes", when, st.LogBytes, st.LiveBytes)
	return float64(st.LogBytes) / float64(bound)
}

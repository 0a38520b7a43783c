package prom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/prom"
	"github.com/walq/walq/queue"
)

// TestEnqueueToAckBucketHoldsOnlyValuesUpToItsBound: a bucket's le is an
// inclusive upper bound, but the queue bucketed an enqueue-to-ack time by
// its whole milliseconds, so 2.0485 s was counted under le="2.048".
func TestEnqueueToAckBucketHoldsOnlyValuesUpToItsBound(t *testing.T) {
	clock := fakeclock.New()
	q, err := queue.Open(t.TempDir(), &queue.Options{Clock: clock, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("m"))
	require.NoError(t, err)
	clock.Advance(2048*time.Millisecond + 500*time.Microsecond)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(prom.NewCollector(q, nil)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "walq_enqueue_to_ack_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		require.InDelta(t, 2.0485, h.GetSampleSum(), 1e-9)
		for _, b := range h.GetBucket() {
			want := uint64(0)
			if b.GetUpperBound() >= 2.0485 {
				want = 1
			}
			require.Equal(t, want, b.GetCumulativeCount(), "le=%v", b.GetUpperBound())
		}
		return
	}
	t.Fatal("walq_enqueue_to_ack_seconds not gathered")
}

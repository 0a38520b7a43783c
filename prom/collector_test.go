package prom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/prom"
	"github.com/walq/walq/queue"
)

func TestCollectorExposesTheQueue(t *testing.T) {
	clock := fakeclock.New()
	q, err := queue.Open(t.TempDir(), &queue.Options{Clock: clock, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		_, err := q.Enqueue(ctx, []byte("m"))
		require.NoError(t, err)
	}
	clock.Advance(3 * time.Second)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad"))
	_, err = q.TryDequeue()
	require.NoError(t, err)

	c := prom.NewCollector(q, prometheus.Labels{"queue": "orders"})
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems, "names and units follow the conventions")

	want := `
# HELP walq_messages Messages by state.
# TYPE walq_messages gauge
walq_messages{queue="orders",state="dead"} 1
walq_messages{queue="orders",state="delayed"} 0
walq_messages{queue="orders",state="in_flight"} 1
walq_messages{queue="orders",state="ready"} 1
# HELP walq_messages_acked_total Messages acked.
# TYPE walq_messages_acked_total counter
walq_messages_acked_total{queue="orders"} 1
# HELP walq_messages_dead_lettered_total Messages moved to the dead-letter set.
# TYPE walq_messages_dead_lettered_total counter
walq_messages_dead_lettered_total{queue="orders"} 1
# HELP walq_messages_enqueued_total Messages enqueued.
# TYPE walq_messages_enqueued_total counter
walq_messages_enqueued_total{queue="orders"} 4
# HELP walq_oldest_message_age_seconds Age of the oldest live, not dead, message (of a sorted queue, pending or leased value).
# TYPE walq_oldest_message_age_seconds gauge
walq_oldest_message_age_seconds{queue="orders"} 3
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"walq_messages", "walq_messages_acked_total", "walq_messages_dead_lettered_total",
		"walq_messages_enqueued_total", "walq_oldest_message_age_seconds"))

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "walq_enqueue_to_ack_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		assert.Equal(t, uint64(1), h.GetSampleCount())
		assert.InDelta(t, 3.0, h.GetSampleSum(), 1e-9)
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() < 2.048 {
				assert.Zero(t, b.GetCumulativeCount(), "bucket %v", b.GetUpperBound())
			} else if b.GetUpperBound() >= 4.096 {
				assert.Equal(t, uint64(1), b.GetCumulativeCount(), "bucket %v", b.GetUpperBound())
			}
		}
		return
	}
	t.Fatal("walq_enqueue_to_ack_seconds not gathered")
}

// A windowed queue's values waiting show in the oldest message's age, by
// the queue's clock.
func TestCollectorOldestWindowedValue(t *testing.T) {
	clock := fakeclock.New()
	w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{Window: time.Hour,
		SortedOptions: queue.SortedOptions{Options: queue.Options{Clock: clock, ManualRequeue: true}}})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(context.Background(), "k", []byte("v")))
	clock.Advance(90 * time.Second)
	want := `
# HELP walq_oldest_message_age_seconds Age of the oldest live, not dead, message (of a sorted queue, pending or leased value).
# TYPE walq_oldest_message_age_seconds gauge
walq_oldest_message_age_seconds 90
`
	require.NoError(t, testutil.CollectAndCompare(prom.NewCollector(w, nil), strings.NewReader(want),
		"walq_oldest_message_age_seconds"))
}

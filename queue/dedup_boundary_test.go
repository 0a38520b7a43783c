package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A producer-given id is refused while its message is live, leased,
// delayed or ready again alike, and after its ack for DedupWindow: an id
// acked exactly DedupWindow ago is still refused (package doc), a
// nanosecond later it is accepted.
func TestDedupWindowBoundary(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, DedupWindow: time.Hour, ManualRequeue: true})
	defer q.Close()
	dup := func(why string) {
		t.Helper()
		_, err := q.Enqueue(ctx, []byte("again"), queue.WithID("x"))
		require.ErrorIs(t, err, queue.ErrDuplicate, why)
	}
	enqueue(t, q, "a", queue.WithID("x"), queue.WithDelay(time.Minute))
	dup("delayed")
	clk.Advance(time.Minute)
	m := tryDequeue(t, q)
	dup("leased")
	require.NoError(t, m.Nack(0))
	dup("ready again")
	require.NoError(t, tryDequeue(t, q).Ack())
	dup("just acked")
	clk.Advance(time.Hour)
	dup("acked exactly DedupWindow ago")
	clk.Advance(time.Nanosecond)
	enqueue(t, q, "b", queue.WithID("x"))
	require.Equal(t, "b", string(tryDequeue(t, q).Payload))
}

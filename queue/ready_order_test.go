package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// The README's order: messages ready again (nacked, lease ran out) and
// delayed messages whose time has come go first, oldest enqueue first,
// whatever order they became ready in; then never-delivered messages in
// enqueue order, even those enqueued before a due delayed message.
func TestReadyAgainBeforeNeverDelivered(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true})
	defer q.Close()
	enqueue(t, q, "delayed-first", queue.WithDelay(time.Second))
	for _, p := range []string{"nacked-late", "expired", "nacked-early", "never-1", "never-2"} {
		enqueue(t, q, p)
	}
	enqueue(t, q, "delayed-last", queue.WithDelay(time.Second))
	late, expired, early := tryDequeue(t, q), tryDequeue(t, q), tryDequeue(t, q)
	require.Equal(t, []string{"nacked-late", "expired", "nacked-early"},
		[]string{string(late.Payload), string(expired.Payload), string(early.Payload)})
	require.NoError(t, early.Nack(0))
	require.NoError(t, late.Nack(0)) // ready again after nacked-early, enqueued before it
	clk.Advance(time.Minute)         // expired's lease runs out; the delays end
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	want := []string{"delayed-first", "nacked-late", "expired", "nacked-early", "delayed-last", "never-1", "never-2"}
	var got []string
	for range want {
		m := tryDequeue(t, q)
		got = append(got, string(m.Payload))
		require.NoError(t, m.Ack())
	}
	require.Equal(t, want, got)
	requireEmpty(t, q)
}

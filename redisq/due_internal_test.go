package redisq

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestDelayedOvertakesFresh: a dequeue promotes due delayed messages only
// once the time kept in '#w' has passed, so every delayed write must
// lower it. A message delayed (by an enqueue or a nack) while fresh
// messages wait is leased first once it is due, by a lone and by a batch
// dequeue. The handle's clock stands still, so its housekeeper never
// finds anything due: only the dequeues, run at later times, promote.
func TestDelayedOvertakesFresh(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, srv.Client(), "overtake", &Options{Clock: clock, AckTimeout: time.Hour, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	t0 := clock.Now()
	for _, p := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	a := leaseAt(t, q, t0, 1)
	require.Equal(t, "a", string(a[0].Payload))

	_, err = q.Enqueue(ctx, []byte("d"), queue.WithDelay(time.Minute))
	require.NoError(t, err)
	got := leaseAt(t, q, t0.Add(59*time.Second), 1)
	require.Equal(t, "b", string(got[0].Payload), "not due yet")
	got = leaseAt(t, q, t0.Add(time.Minute), 1)
	require.Equal(t, "d", string(got[0].Payload), "a due delayed enqueue goes before fresh messages")

	require.NoError(t, a[0].Nack(2*time.Minute))
	got = leaseAt(t, q, t0.Add(2*time.Minute), 2)
	require.Len(t, got, 2)
	require.Equal(t, "a", string(got[0].Payload), "a due delayed nack goes before fresh messages")
	require.Equal(t, 2, got[0].Deliveries)
	require.Equal(t, "c", string(got[1].Payload))
}

// leaseAt runs the dequeue function at the time at for up to max
// messages.
func leaseAt(t *testing.T, q *Queue, at time.Time, max int) []*queue.Message {
	t.Helper()
	args := q.leaseArgs(at, max)
	v, err := q.run(context.Background(), fnDequeue, at, args...)
	require.NoError(t, err)
	reply := v.([]any)
	var out []*queue.Message
	for i := 1; i+2 < len(reply); i += 3 {
		tok, _ := strconv.ParseUint(args[2+len(out)].(string), 10, 64)
		m, err := decodeMessage(reply[i+2], queue.Receipt{Seq: uint64(toInt(reply[i])), Lease: tok})
		require.NoError(t, err)
		m.Deliveries = int(toInt(reply[i+1]))
		out = append(out, queue.NewMessage(q, *m))
	}
	return out
}

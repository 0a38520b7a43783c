package redisq

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestGatheredLeasesTakeLease1: lone Dequeues gathered into one call
// run lease1, which leases each its message in order, as dequeue would;
// a popped message that needs its burial or kill sends the whole call
// to dequeue with nothing leased, which kills it and leases the others.
func TestGatheredLeasesTakeLease1(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	var mu sync.Mutex
	var fns []string // the leasing functions called, guarded by mu
	rdb.AddHook(&fcallFaults{seen: func(fn string, _ []any, _ error) {
		if op := fn[strings.LastIndex(fn, "_")+1:]; op == "lease1" || op == "dequeue" {
			mu.Lock()
			fns = append(fns, op)
			mu.Unlock()
		}
	}})
	called := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return fns
	}
	reset := func() {
		mu.Lock()
		defer mu.Unlock()
		fns = nil
	}
	unlimited, err := Open(ctx, rdb, "gathered-lease", &Options{AckTimeout: time.Minute, ManualRequeue: true, MaxDeliveries: -1})
	require.NoError(t, err)
	defer unlimited.Close()
	limited, err := Open(ctx, rdb, "gathered-lease", &Options{AckTimeout: time.Minute, ManualRequeue: true, MaxDeliveries: 1})
	require.NoError(t, err)
	defer limited.Close()
	for _, p := range []string{"a", "b", "c"} {
		_, err := unlimited.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}

	reset()
	ms, _, err := unlimited.lease(ctx, 3, true)
	require.NoError(t, err)
	require.Equal(t, []string{"lease1"}, called(), "one call of lease1")
	require.Equal(t, []string{"a", "b", "c"}, payloads(ms), "leased in order")
	for _, m := range ms {
		require.Equal(t, 1, m.Deliveries)
	}
	require.NotEqual(t, ms[0].Receipt.Lease, ms[1].Receipt.Lease, "a token per delivery")
	require.NoError(t, ms[1].Ack())
	require.NoError(t, ms[2].Ack())
	require.NoError(t, ms[0].Nack(0)) // ready again, delivered once: at limited's limit
	_, err = unlimited.Enqueue(ctx, []byte("d"))
	require.NoError(t, err)

	reset()
	ms, _, err = limited.lease(ctx, 2, true)
	require.NoError(t, err)
	require.Equal(t, []string{"lease1", "dequeue"}, called(), "lease1 leaves the kill to dequeue")
	require.Equal(t, []string{"d"}, payloads(ms), "the message at the limit is not delivered again")
	dead, err := limited.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "a", string(dead[0].Payload))
	require.Contains(t, dead[0].Reason, "limit 1; not delivered again")
	require.NoError(t, ms[0].Ack())
	_, err = limited.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
}

func payloads(ms []*queue.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload)
	}
	return out
}

package redisq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestNackAllDeadHoldsNothing: a nack with a delay holds the key only if
// a value went back; when every value of the batch reached MaxDeliveries
// and went dead, a hold would only hold back the values published since,
// never delivered. So the embedded queue holds nothing then, and Redis
// must not either.
func TestNackAllDeadHoldsNothing(t *testing.T) {
	srv := redistest.Start(t)
	for _, single := range []bool{false, true} {
		t.Run(map[bool]string{false: "many", true: "single"}[single], func(t *testing.T) {
			ctx := context.Background()
			clock := queuetest.NewClock()
			emb, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{SingleFlight: single,
				Options: queue.Options{Sync: queue.SyncNever, Clock: clock, AckTimeout: time.Minute, MaxDeliveries: 1}})
			require.NoError(t, err)
			defer emb.Close()
			red, err := redisq.OpenSorted[int64](ctx, srv.Client(), t.Name(), &redisq.SortedOptions{SingleFlight: single,
				Options: redisq.Options{ManualRequeue: true, Clock: noTimers{clock}, AckTimeout: time.Minute, MaxDeliveries: 1}})
			require.NoError(t, err)
			defer red.Close()
			for name, e := range map[string]queue.SortedQueue[int64]{"embedded": emb, "redis": red} {
				require.NoError(t, e.Publish(ctx, 1, "k", []byte("first")))
				bs, err := e.TryPull(10)
				require.NoError(t, err)
				require.Len(t, bs, 1)
				require.NoError(t, e.Publish(ctx, 2, "k", []byte("second")))
				require.NoError(t, bs[0].Nack(time.Hour), name)
				got, err := e.TryPull(10)
				if errors.Is(err, queue.ErrEmpty) {
					t.Fatalf("%s: the key is held for an hour though the nacked batch went dead whole", name)
				}
				require.NoError(t, err, name)
				require.Len(t, got, 1, name)
				require.Equal(t, "second", string(got[0].Values[0].Payload), name)
			}
		})
	}
}

package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSortedConsumerOwnsPayload: a pulled batch's payloads are the
// consumer's, as a Message's are. A consumer that writes into them (an
// in-place decode, a reused buffer) and gives the batch back, by Nack or by
// letting its lease run out, must not change what the next delivery of
// the same values carries, whether the payload was cached in memory or
// read from the log.
func TestSortedConsumerOwnsPayload(t *testing.T) {
	for _, c := range []struct {
		name  string
		cache int64
	}{{"cached", 0}, {"from-log", -1}} {
		for _, back := range []string{"nack", "expiry"} {
			t.Run(c.name+"/"+back, func(t *testing.T) {
				clock := newFakeClock()
				sq, err := queue.OpenSorted[int](t.TempDir(), &queue.SortedOptions{CacheBytes: c.cache,
					Options: queue.Options{Clock: clock, ManualRequeue: true, AckTimeout: time.Second}})
				require.NoError(t, err)
				defer sq.Close()
				ctx := context.Background()
				require.NoError(t, sq.Publish(ctx, 1, "k", []byte("first value")))
				require.NoError(t, sq.Publish(ctx, 2, "k", []byte("second value")))
				bs, err := sq.TryPull(10)
				require.NoError(t, err)
				require.Equal(t, []string{"first value", "second value"}, payloads(bs[0]))
				for _, v := range bs[0].Values {
					copy(v.Payload, "XXXXXX") // the consumer's buffer now
				}
				if back == "nack" {
					require.NoError(t, bs[0].Nack(0))
				} else {
					clock.Advance(2 * time.Second)
					n, err := sq.RequeueExpired()
					require.NoError(t, err)
					require.Equal(t, 1, n)
				}
				again, err := sq.TryPull(10)
				require.NoError(t, err)
				require.Equal(t, []string{"first value", "second value"}, payloads(again[0]),
					"the redelivery carries what the consumer of the first one wrote")
			})
		}
	}
}

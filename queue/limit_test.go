package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDeliveryLimitAtDelivery: a ready message that has had MaxDeliveries
// is dead-lettered when a delivery would take it, not delivered once more:
// after an open that applied no limit ended its lease, and after the
// application lowered its limit. The message behind it is delivered.
func TestDeliveryLimitAtDelivery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // MaxDeliveries of the opens that deliver it 3 times
		tool   bool
	}{
		{name: "open without limit after a crash", before: 3, tool: true},
		{name: "limit lowered", before: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			o := &queue.Options{MaxDeliveries: tc.before, AckTimeout: time.Minute, ManualRequeue: true}
			q, err := queue.Open(dir, o)
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("poison"), queue.WithID("poison"))
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("next"), queue.WithID("next"))
			require.NoError(t, err)
			for range 2 {
				m, err := q.TryDequeue()
				require.NoError(t, err)
				require.NoError(t, m.Nack(0))
			}
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, 3, m.Deliveries)
			if tc.tool {
				m, err := q.TryDequeue() // "next", given back: ready
				require.NoError(t, err)
				require.NoError(t, m.Nack(0))
				image := crashImage(t, dir)
				require.NoError(t, q.Close())
				dir = image
				tool, err := queue.Open(dir, &queue.Options{MaxDeliveries: -1})
				require.NoError(t, err)
				require.Equal(t, 1, tool.Recovery().Requeued)
				require.Equal(t, 0, tool.Recovery().DeadOnOpen)
				require.NoError(t, tool.Close())
			} else {
				require.NoError(t, m.Nack(0))
				require.NoError(t, q.Close())
			}

			q, err = queue.Open(dir, &queue.Options{MaxDeliveries: 3, AckTimeout: time.Minute, ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			m, err = q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "next", m.ID, "the message with 3 deliveries of 3 was delivered again")
			dead, err := q.DeadLetters(0, 0)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, "poison", dead[0].ID)
			require.Equal(t, 3, dead[0].Deliveries)
			require.Equal(t, "3 deliveries, limit 3; not delivered again", dead[0].Reason)
			_, err = q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty)
		})
	}
}

package queue_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDeliveriesOwnTheirIDAndPayload delivers messages from the cursor
// whose payload sizes and id lengths change from one to the next (so that
// memory a delivery would size from the one before fits some and not
// others). Each delivery must hold its own copies: its
// Message's id and payload stay as enqueued after later deliveries read
// on (about 1 MiB of records, so that the cursor's read-ahead buffer of
// 256 KiB is refilled over the bytes it delivered), and so does the id the
// queue keeps for the leased message, which a redelivery (after a Nack)
// returns and a dedup window refuses.
func TestDeliveriesOwnTheirIDAndPayload(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{Sync: queue.SyncNever, DedupWindow: 1 << 40})
	defer q.Close()
	ctx := context.Background()
	sizes := []int{100, 100, 101, 3, 3, 700, 5000, 5000, 0, 100, 300, 300, 2000}
	type sent struct {
		id      string
		payload []byte
	}
	var want []sent
	for round := range 60 {
		for i, n := range sizes {
			p := bytes.Repeat([]byte{byte('a' + i)}, n)
			var opts []queue.EnqueueOption
			if i%3 != 0 { // generated ids (36 bytes) and given ones of other lengths
				opts = append(opts, queue.WithID(fmt.Sprintf("%s-%d-%d", strings.Repeat("k", i), round, i)))
			}
			id, err := q.Enqueue(ctx, p, opts...)
			require.NoError(t, err)
			want = append(want, sent{id, p})
		}
	}
	var got []*queue.Message
	for range want {
		got = append(got, tryDequeue(t, q))
	}
	requireEmpty(t, q)
	for i, m := range got {
		require.Equal(t, want[i].id, m.ID, "delivery %d", i)
		require.Equal(t, want[i].payload, m.Payload, "delivery %d", i)
	}
	for _, m := range got {
		require.NoError(t, m.Nack(0))
	}
	for i := range want {
		m := tryDequeue(t, q)
		require.Equal(t, want[i].id, m.ID, "redelivery %d", i)
		require.Equal(t, want[i].payload, m.Payload, "redelivery %d", i)
		require.Equal(t, 2, m.Deliveries)
		require.NoError(t, m.Ack())
	}
	for i, w := range want {
		if i%len(sizes)%3 != 0 {
			_, err := q.Enqueue(ctx, []byte("again"), queue.WithID(w.id))
			require.ErrorIs(t, err, queue.ErrDuplicate, "id %q", w.id)
		}
	}
}

package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// Without single flight a key can have two leased batches. A nack of the
// second with a shorter delay than the first's replaced the key's hold,
// so the first batch's values were pulled again before their delay had
// passed, though Nack says the key is not pulled before it has; live and
// after a crash alike. A key's hold is now the latest of its nacks'.
func TestShorterNackKeepsTheKeysHold(t *testing.T) {
	for _, short := range []time.Duration{0, time.Second} {
		t.Run(short.String(), func(t *testing.T) {
			clk := newFakeClock()
			dir := t.TempDir()
			o := &queue.SortedOptions{Options: queue.Options{Clock: clk, ManualRequeue: true}}
			s, err := queue.OpenSorted[int64](dir, o)
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, s.Publish(ctx, 1, "k", []byte("first")))
			b1, err := s.TryPull(10)
			require.NoError(t, err)
			require.NoError(t, s.Publish(ctx, 2, "k", []byte("second")))
			b2, err := s.TryPull(10)
			require.NoError(t, err)
			require.NoError(t, b1[0].Nack(time.Minute))
			require.NoError(t, b2[0].Nack(short))
			crashed := crashImage(t, dir)
			held := func(s *queue.Sorted[int64]) {
				t.Helper()
				clk.Advance(2 * time.Second)
				_, err := s.TryPull(10)
				require.ErrorIs(t, err, queue.ErrEmpty, "the first nack's values are pulled before its delay")
				clk.Advance(time.Minute)
				bs, err := s.TryPull(10)
				require.NoError(t, err)
				require.Equal(t, [][]byte{[]byte("first"), []byte("second")}, bs[0].Payloads())
				require.NoError(t, bs[0].Ack())
				clk.Advance(-time.Minute - 2*time.Second)
			}
			held(s)
			require.NoError(t, s.Close())
			s, err = queue.OpenSorted[int64](crashed, o)
			require.NoError(t, err)
			defer s.Close()
			held(s)
		})
	}
}

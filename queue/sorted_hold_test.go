package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A nack's delay holds back the values it puts back. When MaxDeliveries
// sent every value of the batch to the dead set, nothing was put back,
// and the key's hold kept a value published to the key afterwards from
// being pulled until the delay had passed, across a reopen too, though
// that value was never delivered.
func TestNackHoldEndsWithItsValues(t *testing.T) {
	dir := t.TempDir()
	o := &queue.SortedOptions{Options: queue.Options{MaxDeliveries: 1}}
	s, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("poison")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(time.Hour))
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the nacked value went dead")
	require.NoError(t, s.Publish(ctx, 2, "k", []byte("fresh")))

	crashed := crashImage(t, dir) // the nack's record is replayed from the log
	pullFresh := func(s *queue.Sorted[int64]) {
		t.Helper()
		bs, err := s.TryPull(10)
		require.NoError(t, err, "the fresh value is held back by the dead batch's nack")
		require.Len(t, bs, 1)
		require.Equal(t, [][]byte{[]byte("fresh")}, bs[0].Payloads())
		require.NoError(t, bs[0].Ack())
	}
	pullFresh(s)
	require.NoError(t, s.Close())
	s, err = queue.OpenSorted[int64](crashed, o)
	require.NoError(t, err)
	defer s.Close()
	pullFresh(s) // the replay holds it back no more than the live queue did
}

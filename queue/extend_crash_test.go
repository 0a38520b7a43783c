package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A crash ends a lease that an Extend had lengthened, as the package doc
// says ("a crash never keeps a lease for its extended deadline"): after
// the crash the message is ready at once, with its delivery counted, and
// the extended receipt is refused; a sorted batch's values likewise.
func TestCrashEndsExtendedLease(t *testing.T) {
	ctx := context.Background()
	o := &queue.Options{AckTimeout: time.Minute}
	dir := t.TempDir()
	q := open(t, dir, o)
	defer q.Close()
	enqueue(t, q, "a")
	m := tryDequeue(t, q)
	require.NoError(t, m.Extend(time.Hour))
	img := crashImage(t, dir)

	q2 := open(t, img, o)
	defer q2.Close()
	require.Equal(t, 1, q2.Recovery().Requeued)
	again := tryDequeue(t, q2)
	require.Equal(t, m.ID, again.ID)
	require.Equal(t, 2, again.Deliveries)
	require.ErrorIs(t, q2.Ack(m.Receipt), queue.ErrLeaseLost, "the extended receipt of the crashed process")
	require.NoError(t, again.Ack())

	sdir := t.TempDir()
	s, err := queue.OpenSorted[int64](sdir, &queue.SortedOptions{Options: *o})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Extend(time.Hour))
	simg := crashImage(t, sdir)
	s2, err := queue.OpenSorted[int64](simg, &queue.SortedOptions{Options: *o})
	require.NoError(t, err)
	defer s2.Close()
	bs2, err := s2.TryPull(10)
	require.NoError(t, err, "the extended batch's values are pending again")
	require.Len(t, bs2, 1)
	require.Equal(t, 2, bs2[0].Values[0].Deliveries)
	require.ErrorIs(t, s2.Ack(bs[0].Receipt), queue.ErrLeaseLost)
}

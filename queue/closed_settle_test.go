package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// closedKind is a queue whose one delivery's ack was attempted; nack and
// extend settle the same delivery with an invalid argument.
type closedKind struct {
	ackErr       error
	before       int
	close        func() error
	ack          func() error
	nackNegative func() error
	extendZero   func() error
}

func closedPlain(t *testing.T, fs *faultfs.FS) closedKind {
	q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
	_, err := q.Enqueue(context.Background(), []byte("v"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	k := closedKind{before: len(fs.Ops()), close: q.Close, ack: m.Ack,
		nackNegative: func() error { return m.Nack(-1) },
		extendZero:   func() error { return m.Extend(0) }}
	k.ackErr = m.Ack()
	return k
}

func closedSorted(t *testing.T, fs *faultfs.FS) closedKind {
	q, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{FS: fs, ManualRequeue: true}})
	require.NoError(t, err)
	require.NoError(t, q.Publish(context.Background(), 1, "k", []byte("v")))
	bs, err := q.TryPull(10)
	require.NoError(t, err)
	b := bs[0]
	k := closedKind{before: len(fs.Ops()), close: q.Close, ack: b.Ack,
		nackNegative: func() error { return b.Nack(-1) },
		extendZero:   func() error { return b.Extend(0) }}
	k.ackErr = b.Ack()
	return k
}

// TestClosedPoisonedSettleEveryKind: on a closed queue whose log was
// poisoned, every settle of every kind answers ErrClosed: neither the kind
// of queue nor the argument changes which error wins.
func TestClosedPoisonedSettleEveryKind(t *testing.T) {
	for name, mk := range map[string]func(*testing.T, *faultfs.FS) closedKind{"plain": closedPlain, "sorted": closedSorted} {
		t.Run(name, func(t *testing.T) {
			dry := mk(t, faultfs.New(0))
			require.NoError(t, dry.ackErr)
			require.NoError(t, dry.close())
			k := mk(t, faultfs.New(dry.before+1))
			require.ErrorIs(t, k.ackErr, faultfs.ErrInjected)
			_ = k.close() // returns the poison
			assert.ErrorIs(t, k.ack(), queue.ErrClosed, "Ack")
			assert.ErrorIs(t, k.nackNegative(), queue.ErrClosed, "Nack(-1)")
			assert.ErrorIs(t, k.extendZero(), queue.ErrClosed, "Extend(0)")
		})
	}
}

// TestClosedSettleEveryKind: on a healthy closed queue a settle with an
// invalid argument answers ErrClosed on every kind of queue.
func TestClosedSettleEveryKind(t *testing.T) {
	for name, mk := range map[string]func(*testing.T, *faultfs.FS) closedKind{"plain": closedPlain, "sorted": closedSorted} {
		t.Run(name, func(t *testing.T) {
			k := mk(t, faultfs.New(0))
			require.NoError(t, k.ackErr)
			require.NoError(t, k.close())
			assert.ErrorIs(t, k.nackNegative(), queue.ErrClosed, "Nack(-1)")
			assert.ErrorIs(t, k.extendZero(), queue.ErrClosed, "Extend(0)")
		})
	}
}

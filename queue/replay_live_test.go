package queue_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// settler is a lease a test may end: a *queue.Message or a *queue.Batch.
type settler interface {
	Ack() error
	Nack(delay time.Duration) error
	DeadLetter(reason string) error
}

// settleAny acks, nacks with a random delay, or dead-letters s, and
// reports whether it did: a lease that ran out refuses it.
func settleAny(t *testing.T, rng *rand.Rand, s settler) bool {
	t.Helper()
	var err error
	switch rng.IntN(5) {
	case 0, 1:
		err = s.Ack()
	case 2, 3:
		err = s.Nack(time.Duration(rng.IntN(60)) * time.Second)
	default:
		err = s.DeadLetter("test")
	}
	if err != nil {
		require.ErrorIs(t, err, queue.ErrLeaseLost)
	}
	return err == nil
}

// replayable is a queue whose crash images requireReplaysAsLive reopens.
type replayable interface {
	RequeueExpired() (int, error)
	Compact() error
	Close() error
}

// requireReplaysAsLive settles the leases in kept (settleAny), ends the
// expired ones, and requires that the crash image of q's directory dir,
// and the crash image after a Compact (the snapshot path), reopened with
// reopen, show probe the same as q live. It closes q.
func requireReplaysAsLive[Q replayable, S settler, V any](t *testing.T, rng *rand.Rand, dir string, q Q, kept []S,
	reopen func(dir string) Q, probe func(q Q) V) {
	t.Helper()
	for _, s := range kept { // no lease is left for an open to end
		settleAny(t, rng, s)
	}
	_, err := q.RequeueExpired()
	require.NoError(t, err)
	crashed := crashImage(t, dir)
	require.NoError(t, q.Compact())
	compacted := crashImage(t, dir)
	live := probe(q)
	require.NoError(t, q.Close())
	for _, img := range []string{crashed, compacted} {
		r := reopen(img)
		require.Equal(t, live, probe(r), "the reopened queue holds and delivers what the live one did")
		require.NoError(t, r.Close())
	}
}

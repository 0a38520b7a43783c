package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRequeueAllDeadTakesAsyncDead: RequeueAllDead takes a letter that a
// SettleAsync dead-lettered before its Pending completed (its fsync held,
// under SyncAlways): the letter is dead in the queue at once. Its own
// commit, later in the log, covers the dead-letter's record too, and the
// message is ready after a reopen.
func TestRequeueAllDeadTakesAsyncDead(t *testing.T) {
	dir := t.TempDir()
	gate := &syncGate{}
	q, err := Open(dir, &Options{FS: gate})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = q.Enqueue(ctx, []byte("x"), WithID("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NotNil(t, m)

	gate.holdWhen(func() bool { return true })
	p, err := q.SettleAsync(Settlement{Receipt: m.Receipt, Op: SettleDeadLetter, Reason: "r"})
	require.NoError(t, err)
	select {
	case <-gate.held: // the dead-letter's fsync waits
	case <-time.After(hangBound):
		t.Fatal("the dead-letter's fsync never started")
	}
	type result struct {
		n   int
		err error
	}
	requeued := make(chan result, 1)
	go func() {
		n, err := q.RequeueAllDead()
		requeued <- result{n, err}
	}()
	require.Eventually(t, func() bool {
		st := q.Stats()
		return st.Ready == 1 && st.Dead == 0
	}, hangBound, time.Millisecond, "RequeueAllDead left the letter dead")
	select {
	case <-p.Done():
		t.Fatal("the dead-letter completed while its fsync was held")
	default:
	}
	gate.release()
	r := <-requeued
	require.NoError(t, r.err)
	require.Equal(t, 1, r.n)
	require.NoError(t, p.Wait(ctx))
	require.NoError(t, q.Close())

	q, err = Open(dir, nil)
	require.NoError(t, err)
	defer q.Close()
	st := q.Stats()
	require.Equal(t, [2]int64{1, 0}, [2]int64{st.Ready, st.Dead})
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.NotNil(t, m)
	require.Equal(t, "a", m.ID)
	require.Equal(t, 1, m.Deliveries, "the delivery count starts over")
}

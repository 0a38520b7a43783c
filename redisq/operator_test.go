package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSeqKeyLost: an operator deletes the sequence counter of a queue that
// holds messages (DEL, or an EXPIRE that ran out). The counter starts again
// at 1, and an enqueue given a seq that a live message holds would write
// over that message's record and body: the message lost, its id still
// naming the new one. The enqueue must fail instead, and every message
// stays as it was.
func TestSeqKeyLost(t *testing.T) {
	ctx := context.Background()
	seqKey := "walq:{seqlost}:2:seq"
	for _, c := range []struct {
		name    string
		enqueue func(q *redisq.Queue) error
	}{
		{"lone", func(q *redisq.Queue) error { _, err := q.Enqueue(ctx, []byte("new")); return err }},
		{"batch of generated ids", func(q *redisq.Queue) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("new")}, {Payload: []byte("new")}})
			return err
		}},
		{"producer id", func(q *redisq.Queue) error {
			_, err := q.Enqueue(ctx, []byte("new"), queue.WithID("p-new"))
			return err
		}},
		{"delayed", func(q *redisq.Queue) error {
			_, err := q.Enqueue(ctx, []byte("new"), queue.WithDelay(time.Hour))
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			q, err := redisq.Open(ctx, rdb, "seqlost", &redisq.Options{AckTimeout: time.Minute})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("first"), queue.WithID("p-first"))
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("second"))
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, seqKey).Err())

			err = c.enqueue(q)
			require.Error(t, err, "an enqueue after the counter was lost reused the seqs of live messages")
			require.ErrorIs(t, err, queue.ErrCorrupt)
			require.Contains(t, err.Error(), seqKey)

			// The counter is left at 0: the next enqueue is refused too,
			// until the operator sets it back.
			require.ErrorIs(t, c.enqueue(q), queue.ErrCorrupt)
			require.NoError(t, rdb.Set(ctx, seqKey, 2, 0).Err())
			require.NoError(t, c.enqueue(q))

			// Both messages are as they were, in order, then the new ones.
			for _, want := range []string{"first", "second"} {
				m, err := q.TryDequeue()
				require.NoError(t, err)
				require.Equal(t, want, string(m.Payload))
				require.NoError(t, m.Ack())
			}
			for {
				m, err := q.TryDequeue()
				if errors.Is(err, queue.ErrEmpty) {
					break
				}
				require.NoError(t, err)
				require.Equal(t, "new", string(m.Payload))
				require.NoError(t, m.Ack())
			}
		})
	}
}

// TestSortedSeqKeyLost: the same for a sorted queue, whose publish would
// write a new value over the stored value of the live one with its seq.
func TestSortedSeqKeyLost(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	s, err := redisq.OpenSorted[int64](ctx, rdb, "sseqlost", &redisq.SortedOptions{Options: redisq.Options{AckTimeout: time.Minute}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("first")))
	require.NoError(t, s.Publish(ctx, 2, "b", []byte("second")))
	seqKey := "walq:{sseqlost}:s:seq"
	n, err := rdb.Del(ctx, seqKey).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the counter's key")

	err = s.Publish(ctx, 3, "c", []byte("new"))
	require.Error(t, err, "a publish after the counter was lost reused the seq of a live value")
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Contains(t, err.Error(), seqKey)
	require.Contains(t, err.Error(), "SET to at least 2 and", "the count of publishes: the value to restore")
	require.ErrorIs(t, s.Publish(ctx, 3, "c", []byte("new")), queue.ErrCorrupt)
	require.NoError(t, rdb.Set(ctx, seqKey, 2, 0).Err())
	require.NoError(t, s.Publish(ctx, 3, "c", []byte("new")))

	got := map[string]string{}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	for _, b := range bs {
		for _, m := range b.Values {
			got[b.Key] = string(m.Payload)
		}
		require.NoError(t, b.Ack())
	}
	require.Equal(t, map[string]string{"a": "first", "b": "second", "c": "new"}, got)
}

// TestFunctionFlushUnderTraffic: an operator flushes the server's
// functions (FUNCTION FLUSH, FUNCTION DELETE of the library, SCRIPT
// FLUSH) again and again while producers and consumers run. A call that
// finds the library gone loads it and runs; one that finds it gone again
// fails with the server's reply that it ran nothing. No enqueue that
// returned is lost, none is delivered that was not enqueued, and no
// message is acked twice.
func TestFunctionFlushUnderTraffic(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ops := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := redisq.Open(ctx, rdb, "flushfn", &redisq.Options{AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	libs, err := ops.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	lib := libs[0].Name

	var (
		mu              sync.Mutex
		enqueued, acked = map[string]bool{}, map[string]int{}
		tried           = map[string]bool{}
		otherErrs       []error
		next            atomic.Int64
		wg              sync.WaitGroup
	)
	fail := func(err error) {
		if ctx.Err() == nil && !strings.Contains(err.Error(), "ERR Function not found") {
			mu.Lock()
			otherErrs = append(otherErrs, err)
			mu.Unlock()
		}
	}
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := fmt.Sprint("f", next.Add(1))
				mu.Lock()
				tried[id] = true
				mu.Unlock()
				if _, err := q.Enqueue(ctx, []byte(id), queue.WithID(id)); err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				enqueued[id] = true
				mu.Unlock()
			}
		})
		wg.Go(func() {
			for ctx.Err() == nil {
				m, err := q.Dequeue(ctx)
				if err != nil {
					fail(err)
					continue
				}
				require.Equal(t, m.ID, string(m.Payload))
				if err := m.Ack(); err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				acked[m.ID]++
				mu.Unlock()
			}
		})
	}
	flushes := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); flushes++ {
		switch flushes % 3 {
		case 0:
			require.NoError(t, ops.FunctionFlush(ctx).Err())
		case 1:
			if err := ops.FunctionDelete(ctx, lib).Err(); err != nil {
				require.ErrorContains(t, err, "Library not found")
			}
		case 2:
			require.NoError(t, ops.ScriptFlush(ctx).Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	// Drain what is left, leases of the stopped consumers included.
	later := &shiftedClock{d: time.Hour}
	q2, err := redisq.Open(context.Background(), rdb, "flushfn", &redisq.Options{Clock: later, ManualRequeue: true})
	require.NoError(t, err)
	defer q2.Close()
	_, err = q2.RequeueExpired()
	require.NoError(t, err)
	for {
		m, err := q2.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		acked[m.ID]++
	}
	t.Logf("%d flushes; %d enqueues returned, %d acks", flushes, len(enqueued), len(acked))
	require.Empty(t, otherErrs)
	require.NotEmpty(t, enqueued)
	for id := range enqueued {
		require.Equal(t, 1, acked[id], "message %s acked", id)
	}
	for id, n := range acked {
		require.True(t, tried[id], "message %s delivered, never enqueued", id)
		require.Equal(t, 1, n, "message %s acked", id)
	}
}

// TestFlushDBFencesReceipts: FLUSHDB empties the queue (documented: what
// it held is lost). A receipt handed out before it must not settle the
// message that takes its seq after it.
func TestFlushDBFencesReceipts(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "flushdb", &redisq.Options{AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("before"))
	require.NoError(t, err)
	old, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, rdb.FlushDB(ctx).Err())
	require.ErrorIs(t, old.Ack(), queue.ErrLeaseLost)

	_, err = q.Enqueue(ctx, []byte("after"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "after", string(m.Payload))
	require.Equal(t, old.Receipt.String()[:2], m.Receipt.String()[:2], "the same seq")
	require.ErrorIs(t, old.Ack(), queue.ErrLeaseLost)
	require.ErrorIs(t, old.Nack(0), queue.ErrLeaseLost)
	require.NoError(t, m.Ack())
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
}

// TestClientPauseWrite: while an operator holds the server's writes
// (CLIENT PAUSE WRITE), reads run (Stats, DeadLetters) and an Enqueue
// waits for the pause to end, then runs (doc.go).
func TestClientPauseWrite(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	q, err := redisq.Open(ctx, srv.Client(), "paused", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("before"))
	require.NoError(t, err)

	const pause = 1500 * time.Millisecond
	start := time.Now()
	require.NoError(t, srv.Client().Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err())
	st, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Ready)
	_, err = q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Less(t, time.Since(start), pause/2, "reads run during the pause")

	_, err = q.Enqueue(ctx, []byte("during"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), pause-100*time.Millisecond, "the enqueue waited for the pause")
	require.EqualValues(t, 2, q.Stats().Ready)
}

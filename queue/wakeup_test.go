package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A consumer that found nothing can see the asynchronous enqueue it
// missed get written before it goes to sleep: the committer writes without
// the queue's lock. It must still wake for that message. The seam lets
// the write happen inside that window every time the consumer looked
// before the write, instead of once in many thousand rounds.
func TestConsumerWakesForWriteWhileItLooked(t *testing.T) {
	for _, tc := range []struct {
		name string
		get  func(q *Queue) (*Message, error)
	}{
		{"Dequeue", func(q *Queue) (*Message, error) { return q.Dequeue(context.Background()) }},
		{"DequeueBatch", func(q *Queue) (*Message, error) {
			ms, err := q.DequeueBatch(context.Background(), 8)
			if err != nil {
				return nil, err
			}
			return ms[0], nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Open(t.TempDir(), nil)
			require.NoError(t, err)
			defer q.Close()
			q.foundNothing = func() { // under q.mu, like the gap it widens
				for _, f := range q.mu.async.live() {
					<-f.c.Done() // written and fsynced: reaped as done, too
				}
			}
			for i := range 100 {
				got := make(chan *Message, 1)
				go func() {
					m, err := tc.get(q)
					if err != nil {
						t.Error(err)
					}
					got <- m
				}()
				waitWaiting(t, q)
				p, err := q.EnqueueAsync(context.Background(), []byte{byte(i)})
				require.NoError(t, err)
				select {
				case m := <-got:
					require.Equal(t, p.ID(), m.ID)
					require.NoError(t, m.Ack())
				case <-time.After(5 * time.Second):
					t.Fatalf("round %d: the blocked consumer was not woken", i)
				}
			}
		})
	}
}

// waitWaiting waits until a consumer is between looking and sleeping, or
// asleep.
func waitWaiting(t *testing.T, q *Queue) {
	t.Helper()
	for start := time.Now(); q.waiters.Load() == 0; time.Sleep(100 * time.Microsecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("no consumer is waiting")
		}
	}
}

// An asynchronous ack and an asynchronous enqueue can share a commit
// group, the ack first. The ack makes nothing ready, so it wakes no one;
// the enqueue must still wake a consumer that went to sleep before
// either, although its group is already in flight.
func TestEnqueueAsyncAfterAckAsyncWakesConsumer(t *testing.T) {
	q, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	const rounds = 300
	held := make([]*Message, 0, rounds)
	for range rounds {
		_, err := q.Enqueue(ctx, []byte("held"))
		require.NoError(t, err)
		m, err := q.Dequeue(ctx)
		require.NoError(t, err)
		held = append(held, m)
	}
	for i, m := range held {
		got := make(chan *Message, 1)
		go func() {
			m, err := q.Dequeue(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		waitWaiting(t, q)
		_, err := m.AckAsync()
		require.NoError(t, err)
		p, err := q.EnqueueAsync(ctx, []byte{byte(i)})
		require.NoError(t, err)
		select {
		case m := <-got:
			require.Equal(t, p.ID(), m.ID)
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the blocked consumer was not woken", i)
		}
	}
}

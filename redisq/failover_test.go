package redisq_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestFailover kills the primary (SIGKILL) and promotes its replica: what
// was written with Replicas 1 is there, and a receipt of the old primary
// stays fenced: it acks while its lease lives and fails with
// ErrLeaseLost once the message was delivered again.
func TestFailover(t *testing.T) {
	primary, replica := startPair(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, patientClient(t, primary), "failover", &redisq.Options{Replicas: 1, WaitTimeout: patientWait, AckTimeout: time.Minute})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
	}
	ma, err := q.TryDequeue()
	require.NoError(t, err)
	mb, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, q.Extend(mb.Receipt, time.Hour)) // replicated by the next WAIT
	_ = q.Close()

	primary.Kill()
	rc := replica.Client()
	require.NoError(t, rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())

	later := &shiftedClock{d: 2 * time.Minute} // a's lease has run out, b's has not
	q2, err := redisq.Open(ctx, rc, "failover", &redisq.Options{Clock: later, ManualRequeue: true})
	require.NoError(t, err)
	defer q2.Close()
	require.NoError(t, q2.Ack(mb.Receipt), "a live lease of the old primary acks on the new one")
	n, err := q2.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var got []string
	for {
		m, err := q2.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		got = append(got, m.ID)
		if m.ID == "a" {
			require.Equal(t, 2, m.Deliveries)
			require.ErrorIs(t, q2.Ack(ma.Receipt), queue.ErrLeaseLost, "the old delivery's receipt is fenced")
		}
		require.NoError(t, m.Ack())
	}
	require.Equal(t, []string{"a", "c"}, got, "every enqueue confirmed by the replica survived")
}

// startPair starts a primary and a replica that has caught up with it.
func startPair(t *testing.T) (*redistest.Server, *redistest.Server) {
	t.Helper()
	primary := redistest.Start(t, append(append([]string{}, redistest.Durable...), "--repl-diskless-sync-delay", "0")...)
	host, port, err := net.SplitHostPort(primary.Addr)
	require.NoError(t, err)
	replica := redistest.Start(t, append(append([]string{}, redistest.Durable...), "--replicaof", host, port)...)
	rc := replica.Client()
	require.Eventually(t, func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, time.Minute, 20*time.Millisecond)
	return primary, replica
}

// patientWait is the WaitTimeout of a handle on a primary of startPair:
// a replica on a loaded machine may take seconds to acknowledge, and a
// WAIT returns as soon as it has.
const patientWait = 30 * time.Second

// patientClient is a client of srv whose ReadTimeout is above
// patientWait.
func patientClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: 2 * patientWait})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSortedFailover kills the primary (SIGKILL) of a single-flight
// sorted and windowed queue written with Replicas 1, and promotes its
// replica: every publish, ack and dead-letter that returned is there; a
// batch receipt of the old primary settles once while its lease lives
// (its key is not leased again meanwhile, even with a value published
// to it on the new primary) and fails with ErrLeaseLost once its values
// were pulled again or it was settled.
func TestSortedFailover(t *testing.T) {
	for _, f := range sortedForms {
		t.Run(f.name, func(t *testing.T) {
			primary, replica := startPair(t)
			ctx := context.Background()
			s, publish := f.open(t, patientClient(t, primary), "failover",
				redisq.Options{Replicas: 1, WaitTimeout: patientWait, AckTimeout: time.Minute})
			for i, key := range []string{"a", "b", "c", "d"} {
				require.NoError(t, publish(ctx, int64(i), key, []byte(key)))
				time.Sleep(2 * testWindow) // the windowed keys are due in this order
			}
			pull := func(s *redisq.Sorted[time.Time], key string) *queue.Batch[time.Time] {
				t.Helper()
				bs, err := s.TryPull(1)
				require.NoError(t, err)
				require.Len(t, bs, 1)
				require.Equal(t, key, bs[0].Key)
				return bs[0]
			}
			a, b, c, d := pull(s, "a"), pull(s, "b"), pull(s, "c"), pull(s, "d")
			require.NoError(t, b.Extend(time.Hour))
			require.NoError(t, c.Ack())
			require.NoError(t, d.DeadLetter("poison"))
			_ = s.Close()

			primary.Kill()
			rc := replica.Client()
			require.NoError(t, rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
			later := &shiftedClock{d: 2 * time.Minute} // a's lease has run out, b's has not
			s2, publish2 := f.open(t, rc, "failover", redisq.Options{Clock: later, ManualRequeue: true})
			defer s2.Close()
			require.ErrorIs(t, s2.Ack(c.Receipt), queue.ErrLeaseLost, "the ack of the old primary holds")
			require.ErrorIs(t, s2.Ack(d.Receipt), queue.ErrLeaseLost, "the dead-letter of the old primary holds")
			dead, err := s2.DeadValues(0, 0)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, [3]string{"d", "poison", "d"}, [3]string{dead[0].Key, dead[0].Reason, string(dead[0].Payload)})

			require.NoError(t, publish2(ctx, 9, "b", []byte("b2")))
			time.Sleep(2 * testWindow)
			n, err := s2.RequeueExpired()
			require.NoError(t, err)
			require.Equal(t, 1, n)
			again := pull(s2, "a")
			require.Equal(t, 2, again.Values[0].Deliveries)
			require.ErrorIs(t, s2.Ack(a.Receipt), queue.ErrLeaseLost, "the old delivery's receipt is fenced")
			require.ErrorIs(t, s2.Nack(a.Receipt, 0), queue.ErrLeaseLost)
			require.NoError(t, again.Ack())
			_, err = s2.TryPull(10)
			require.ErrorIs(t, err, queue.ErrEmpty, "b's batch of the old primary is out: b is not pulled")
			require.NoError(t, s2.Ack(b.Receipt), "a live lease of the old primary acks on the new one")
			require.ErrorIs(t, s2.Ack(b.Receipt), queue.ErrLeaseLost, "and only once")
			b2 := pull(s2, "b")
			require.Equal(t, []byte("b2"), b2.Values[0].Payload)
			require.Len(t, b2.Values, 1)
			require.NoError(t, b2.Ack())
			_, err = s2.TryPull(10)
			require.ErrorIs(t, err, queue.ErrEmpty)
		})
	}
}

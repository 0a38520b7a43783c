package redisq_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

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
	q, err := redisq.Open(ctx, primary.Client(), "failover", &redisq.Options{Replicas: 1, WaitTimeout: 10 * time.Second, AckTimeout: time.Minute})
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
	}, 10*time.Second, 20*time.Millisecond)
	return primary, replica
}

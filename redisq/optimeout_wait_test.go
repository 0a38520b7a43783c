package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLeaseOpTimeoutBelowWaitTimeout: with Replicas short and OpTimeout
// below WaitTimeout, a client that ends a command's wait with its context
// (ContextTimeoutEnabled) must not drop the reply of a call that leased
// while its WAIT still waits: the message reaches the caller, or is not
// leased.
func TestLeaseOpTimeoutBelowWaitTimeout(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := redisq.Options{Replicas: 1, WaitTimeout: 2 * time.Second, OpTimeout: 300 * time.Millisecond,
		ManualRequeue: true, AckTimeout: time.Hour}
	q, err := redisq.Open(ctx, timedClient(t, srv), "optimeout-wait", &o)
	require.NoError(t, err)
	defer q.Close()
	plain, err := redisq.Open(ctx, srv.Client(), "optimeout-wait", &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	t.Logf("TryDequeue: %v, %v", m != nil, err)
	got := 0
	if m != nil {
		got = 1
	}
	st, err := plain.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, got, st.InFlight, "messages leased on the server but not returned")
}

package redisq_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// dropConn is a connection that, once armed, lets the next FCALL written
// on it reach the server and run, reads the server's whole reply, and
// then drops the connection instead of handing the reply on: a
// connection lost after the server ran the call, before its reply came.
type dropConn struct {
	net.Conn
	armed *atomic.Bool
	drop  bool // an armed FCALL went out on this connection
}

func (c *dropConn) Write(p []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(p), []byte("fcall")) && c.armed.CompareAndSwap(true, false) {
		c.drop = true
	}
	return c.Conn.Write(p)
}

func (c *dropConn) Read(p []byte) (int, error) {
	if !c.drop {
		return c.Conn.Read(p)
	}
	// The reply is read (so the call ran), then thrown away.
	_ = c.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = c.Conn.Read(make([]byte, 1<<16))
	_ = c.Conn.Close()
	return 0, io.EOF
}

// droppingClient is a client of srv whose connections drop the reply of
// an FCALL while armed is set, with go-redis's retries as given.
func droppingClient(t *testing.T, srv *redistest.Server, armed *atomic.Bool, maxRetries int) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:       srv.Addr,
		MaxRetries: maxRetries,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &dropConn{Conn: c, armed: armed}, nil
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestReplyLostAfterRun: a call whose connection drops after the server
// ran it, before its reply came, never reports an outcome other than the
// one the server's run had, on a client that does not retry (MaxRetries
// -1, as the package doc asks). With go-redis's default retries (3) the
// client sends the FCALL again on a new connection and the library
// returns the second run's outcome: an Enqueue of a generated id returns
// success with two messages enqueued, an Ack that acked returns
// ErrLeaseLost, an Enqueue WithID that enqueued returns ErrDuplicate
// (each seen with retries 0 here).
func TestReplyLostAfterRun(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var armed atomic.Bool
	q, err := redisq.Open(ctx, droppingClient(t, srv, &armed, -1), "drop", &redisq.Options{AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	check, err := redisq.Open(ctx, srv.Client(), "drop", &redisq.Options{ReadOnly: true})
	require.NoError(t, err)
	defer check.Close()
	ready := func() int64 {
		s, err := check.StatsContext(ctx)
		require.NoError(t, err)
		return s.Ready
	}

	// An Enqueue of a generated id: an error (outcome unknown) or one message.
	armed.Store(true)
	_, err = q.Enqueue(ctx, []byte("once"))
	if err == nil {
		assert.Equal(t, int64(1), ready(), "an Enqueue that returned success enqueued more than once")
	}
	require.False(t, armed.Load(), "no FCALL was dropped")

	// An Ack whose run acked: nil or an error that is not ErrLeaseLost.
	for ready() > 0 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	_, err = q.Enqueue(ctx, []byte("ack me"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	armed.Store(true)
	err = m.Ack()
	assert.False(t, errors.Is(err, queue.ErrLeaseLost), "an Ack that acked returned %v", err)
	require.Zero(t, ready())

	// An Enqueue WithID that enqueued: not ErrDuplicate.
	armed.Store(true)
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("given"))
	assert.False(t, errors.Is(err, queue.ErrDuplicate), "an Enqueue that enqueued returned %v", err)
	require.Equal(t, int64(1), ready())
}

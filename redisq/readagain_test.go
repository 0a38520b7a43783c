package redisq_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// dropOn is a connection that, once armed, drops the reply of the next
// command it writes that holds word (lower case): the command runs on
// the server, the client sees its connection close.
type dropOn struct {
	net.Conn
	word  []byte
	armed *atomic.Bool
	drop  bool
}

func (c *dropOn) Write(p []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(p), c.word) && c.armed.CompareAndSwap(true, false) {
		c.drop = true
	}
	return c.Conn.Write(p)
}

func (c *dropOn) Read(p []byte) (int, error) {
	if !c.drop {
		return c.Conn.Read(p)
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = c.Conn.Read(make([]byte, 1<<16))
	_ = c.Conn.Close()
	return 0, io.EOF // as after CLIENT KILL
}

// TestReadAgainAfterDrop: on a client that does not retry, what only
// reads is sent again by the handle when its connection drops: Open's
// CONFIG GET (which would otherwise fail Open with advice to set
// TrustServer), its GET of an older layout's key, and Stats (a no-writes function); a call that writes is
// not (TestReplyLostAfterRun).
func TestReadAgainAfterDrop(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var armed atomic.Bool
	client := func(word string) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1,
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &dropOn{Conn: c, word: []byte(word), armed: &armed}, nil
			}})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}

	armed.Store(true)
	q, err := redisq.Open(ctx, client("config"), "again", nil)
	require.False(t, armed.Load(), "no CONFIG GET was dropped")
	require.NoError(t, err, "Open over a dropped CONFIG GET")
	require.NoError(t, q.Close())

	armed.Store(true) // Open's GET of an older layout's key
	q, err = redisq.Open(ctx, client("$3\r\nget\r\n"), "again", &redisq.Options{TrustServer: true})
	require.False(t, armed.Load(), "no GET was dropped")
	require.NoError(t, err, "Open over a dropped GET")
	require.NoError(t, q.Close())

	q, err = redisq.Open(ctx, client("fcall"), "again", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	armed.Store(true)
	s, err := q.StatsContext(ctx)
	require.False(t, armed.Load(), "no FCALL was dropped")
	require.NoError(t, err, "Stats over a dropped connection")
	require.Equal(t, int64(1), s.Ready)
}

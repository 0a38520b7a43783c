package redisq_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
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

// dropOnClient is a client of addr that does not retry, whose connections
// drop the reply of the next command holding word while armed is set.
func dropOnClient(t *testing.T, addr, word string, armed *atomic.Bool) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &dropOn{Conn: c, word: []byte(word), armed: armed}, nil
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestReadAgainAfterDrop: on a client that does not retry, what only
// reads is sent again by the handle when its connection drops: Open's
// CONFIG GET (which would otherwise fail Open with the dropped
// connection's error), its GET of an older layout's key, and Stats (a no-writes function); a call that writes is
// not (TestReplyLostAfterRun).
func TestReadAgainAfterDrop(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var armed atomic.Bool
	client := func(word string) *redis.Client { return dropOnClient(t, srv.Addr, word, &armed) }

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

// TestOpenAgainAfterDrop: on a client that does not retry, Open,
// OpenSorted and OpenWindowed send again what a second run leaves as the
// first left it, when its connection drops after the server ran it: the
// library's FUNCTION LIST and FUNCTION LOAD (of the same code), the FCALL
// of the function that writes nothing (the check that the server takes
// writes) and of the ACL's probe (no-writes), a sorted queue's HGET and
// HSETNX of its kind, form and SingleFlight (a second HSETNX sets
// nothing, and the HGET after it reads what the queue records), and the
// SUBSCRIBE to the wake channel. Each case drops the first command that
// holds its word; a fresh queue name (and no library on the server where
// the case is FUNCTION LOAD) makes the command run.
func TestOpenAgainAfterDrop(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var armed atomic.Bool
	client := func(t *testing.T, word string) *redis.Client { return dropOnClient(t, srv.Addr, word, &armed) }
	type open func(rdb redis.UniversalClient, name string) (interface{ Close() error }, error)
	ack := func(rdb redis.UniversalClient, name string) (interface{ Close() error }, error) {
		return redisq.Open(ctx, rdb, name, nil)
	}
	sorted := func(rdb redis.UniversalClient, name string) (interface{ Close() error }, error) {
		return redisq.OpenSorted[int64](ctx, rdb, name, &redisq.SortedOptions{SingleFlight: true})
	}
	windowed := func(rdb redis.UniversalClient, name string) (interface{ Close() error }, error) {
		return redisq.OpenWindowed(ctx, rdb, name, &redisq.WindowOptions{Window: time.Second})
	}
	cases := []struct {
		name, word string
		open       open
		flush      bool // remove the libraries first, so that Open loads one
	}{
		{"ack FUNCTION LIST", "$4\r\nlist\r\n", ack, false},
		{"ack FUNCTION LOAD", "$7\r\nreplace\r\n", ack, true},
		{"ack writable", "_writable\r\n", ack, false},
		{"ack probe", "_probe\r\n", ack, false},
		{"ack SUBSCRIBE", "subscribe", ack, false},
		{"sorted FUNCTION LIST", "$4\r\nlist\r\n", sorted, false},
		{"sorted FUNCTION LOAD", "$7\r\nreplace\r\n", sorted, true},
		{"sorted writable", "_writable\r\n", sorted, false},
		{"sorted HGET", "hget", sorted, false},
		{"sorted HSETNX form", "$4\r\nform\r\n", sorted, false},
		{"sorted HSETNX kind", "$4\r\nkind\r\n$", sorted, false},
		{"sorted HSETNX single", "$6\r\nsingle\r\n$1\r\n1", sorted, false},
		{"sorted probe", "_probe\r\n", sorted, false},
		{"windowed HSETNX form", "$8\r\nwindowed", windowed, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.flush {
				require.NoError(t, srv.Client().FunctionFlush(ctx).Err())
			}
			armed.Store(true)
			q, err := c.open(client(t, strings.ToLower(c.word)), fmt.Sprintf("open-again-%d", i))
			require.False(t, armed.Load(), "no command holding %q was dropped", c.word)
			require.NoError(t, err, "Open over a dropped %s", c.name)
			require.NoError(t, q.Close())
		})
	}
}

// TestLoadAgainInCall: a call that finds the server without the library
// (a restart without persistence) loads it and runs; a FUNCTION LOAD
// whose connection drops is sent again (the same code, loaded again,
// changes nothing), before the call runs once.
func TestLoadAgainInCall(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var armed atomic.Bool
	rdb := dropOnClient(t, srv.Addr, "$7\r\nreplace\r\n", &armed)
	q, err := redisq.Open(ctx, rdb, "load-again", nil)
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, srv.Client().FunctionFlush(ctx).Err())
	armed.Store(true)
	_, err = q.Enqueue(ctx, []byte("x"))
	require.False(t, armed.Load(), "no FUNCTION LOAD was dropped")
	require.NoError(t, err, "an Enqueue whose library load dropped")
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Ready)
}

// TestSubscribeAgainWakes: a handle whose SUBSCRIBE at Open dropped, and
// was sent again, is subscribed: a Dequeue blocked on its empty queue
// (which looks again only when woken) returns the message another handle
// enqueues.
func TestSubscribeAgainWakes(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	var armed atomic.Bool
	rdb := dropOnClient(t, srv.Addr, "subscribe", &armed)
	armed.Store(true)
	q, err := redisq.Open(ctx, rdb, "subscribe-again", nil)
	require.NoError(t, err)
	defer q.Close()
	require.False(t, armed.Load(), "no SUBSCRIBE was dropped")
	producer, err := redisq.Open(ctx, srv.Client(), "subscribe-again", nil)
	require.NoError(t, err)
	defer producer.Close()

	got := make(chan error, 1)
	go func() {
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		m, err := q.Dequeue(wait)
		if err == nil {
			err = m.Ack()
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // the Dequeue looks, finds none, and waits
	_, err = producer.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, <-got, "the blocked Dequeue was woken")
}

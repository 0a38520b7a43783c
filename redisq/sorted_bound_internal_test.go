package redisq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedPullBoundedByIdleSteps: no stored data makes one pull call
// run long, and a pull does not say empty while a key is pullable.
// Members of the pull order that lease nothing (strays, and keys whose
// pending values are gone, as when an operator deletes a wrong-typed
// pend key) count toward the call's cap of 1000, and a call that
// reaches it tells the handle to call again: TryPull returns the real
// key behind them.
func TestSortedPullBoundedByIdleSteps(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	var pulls atomic.Int64
	rdb.AddHook(&fcallFaults{seen: func(fn string, args []any, _ error) {
		if isCall(fn, args, "grow", "pull") {
			pulls.Add(1)
		}
	}})
	for _, tc := range []struct {
		name  string
		n     int
		place func(s *Sorted[string], i int) []any // commands that write member i
	}{
		{"strays", 1001, func(s *Sorted[string], i int) []any {
			return []any{"ZADD", s.keys[5], 0, fmt.Sprintf("\x00\x00%d", i)}
		}},
		{"keys without values", 2500, func(s *Sorted[string], i int) []any {
			return []any{"ZADD", s.keys[5], 0, fmt.Sprintf("x\x00\x01key-%d", i)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenSorted[string](ctx, rdb, "bound-"+tc.name, &SortedOptions{Options: Options{ManualRequeue: true}})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Publish(ctx, "y", "k1", []byte("v1")))
			pipe := rdb.Pipeline()
			for i := range tc.n {
				pipe.Do(ctx, tc.place(s, i)...)
				if tc.name != "strays" {
					pipe.HSet(ctx, s.keys[6], fmt.Sprintf("key-%d", i), fmt.Sprintf("x\x00\x01key-%d", i))
				}
			}
			_, err = pipe.Exec(ctx)
			require.NoError(t, err)
			pulls.Store(0)
			bs, err := tryPullBounded(t, rdb, s, 10)
			require.NoError(t, err, "k1 is pullable")
			require.Len(t, bs, 1)
			require.Equal(t, "k1", bs[0].Key)
			require.NoError(t, bs[0].Ack())
			require.Equal(t, int64(tc.n/1000+1), pulls.Load(), "pull calls, each dropping at most 1000")
			_, err = s.TryPull(10)
			require.True(t, errors.Is(err, queue.ErrEmpty), "%v", err)
			n, err := rdb.ZCard(ctx, s.keys[5]).Result()
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}
}

// TestSortedCappedPullWakes: a pull that stops at its cap of idle steps
// leaves pullable keys behind it, which its caller may not come back
// for: it must wake the other handles' blocked pulls, as a dequeue that
// stops at its cap of burials does. Here the pull order, held aside
// while a handle blocks on the empty queue, is put back by hand
// (announcing nothing): a second handle's TryPull takes k1 and stops at
// the 1000 strays before k2, and the blocked Pull gets k2.
func TestSortedCappedPullWakes(t *testing.T) {
	ctx := context.Background()
	c := newCapWake(t, "capwake")
	a, b := c.a, c.b

	require.NoError(t, b.Publish(ctx, "a", "k1", []byte("v1")))
	require.NoError(t, b.Publish(ctx, "z", "k2", []byte("v2")))
	c.setOrderAside(t) // with strays between k1 and k2

	got := make(chan []*queue.Batch[string], 1)
	go func() {
		bs, err := a.Pull(ctx, 1)
		if err != nil {
			bs = nil
		}
		got <- bs
	}()
	c.putOrderBack(t)

	bs, err := b.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "k1", bs[0].Key)
	select {
	case bs := <-got:
		require.Len(t, bs, 1)
		require.Equal(t, "k2", bs[0].Key)
	case <-time.After(10 * time.Second):
		t.Fatal("k2 is pullable and the blocked Pull sleeps: the capped pull woke no one")
	}
}

// TestSortedCappedIdlePullQuiet: a pull call stopped at IDLE having
// leased nothing wakes no waiting pull (its caller calls again itself):
// the wake channel carries no 'r' from a pull over strays alone.
func TestSortedCappedIdlePullQuiet(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := srv.Client()
	s, err := OpenSorted[string](ctx, srv.Client(), "capquiet", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	defer s.Close()
	pipe := admin.Pipeline()
	for i := range 1500 { // past IDLE, sorted.lua
		pipe.ZAdd(ctx, s.keys[5], redis.Z{Member: fmt.Sprintf("m%04d", i)})
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	sub := srv.Client().Subscribe(ctx, s.wake)
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)

	_, err = s.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty)
	require.NoError(t, admin.Publish(ctx, s.wake, "end").Err()) // after every message of the pull
	var got []string
	for {
		m, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		if m.Payload == "end" {
			break
		}
		got = append(got, m.Payload)
	}
	require.NotContains(t, got, "r", "a pull that leased nothing woke the waiters")
}

// TestSortedCappedLaterCall is TestSortedCappedPullWakes where the cap
// falls in a later call of one pull (max above the 1000 batches of a
// call): the first call leases 1000 keys, the second meets the 1000
// strays before key "last" and leases nothing, so it wakes no one. The
// key behind them must still be reached: by the pull that met the
// strays, or by the blocked Pull of the other handle.
func TestSortedCappedLaterCall(t *testing.T) {
	ctx := context.Background()
	c := newCapWake(t, "caplater")
	a, b := c.a, c.b

	for i := range pullTokens {
		require.NoError(t, b.Publish(ctx, fmt.Sprintf("a%04d", i), fmt.Sprintf("k%04d", i), []byte("v")))
	}
	require.NoError(t, b.Publish(ctx, "z", "last", []byte("v2")))
	c.setOrderAside(t) // with strays before "last"

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan []*queue.Batch[string], 1)
	go func() {
		bs, _ := a.Pull(wctx, 1)
		got <- bs
	}()
	c.putOrderBack(t)

	bs, err := b.TryPull(math.MaxInt)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(bs), pullTokens)
	keys := map[string]bool{}
	for _, x := range bs[:pullTokens] {
		keys[x.Key] = true
	}
	require.Len(t, keys, pullTokens, "the first call's keys")
	if len(bs) > pullTokens {
		require.Len(t, bs, pullTokens+1)
		require.Equal(t, "last", bs[pullTokens].Key, "the pull went on past the strays")
		return
	}
	select {
	case bs := <-got:
		require.Len(t, bs, 1)
		require.Equal(t, "last", bs[0].Key)
	case <-time.After(10 * time.Second):
		t.Fatal(`"last" is pullable and the blocked Pull sleeps: the capped later call woke no one`)
	}
}

// capWake is what the tests of a capped pull's wake share: handles a and
// b of one sorted queue, a's pull calls counted in pulls, and admin, a
// client of their server.
type capWake struct {
	a, b  *Sorted[string]
	admin *redis.Client
	pulls atomic.Int64 // a's pull calls so far
}

// newCapWake opens the sorted queue name twice on a new server; t's
// cleanup closes both handles.
func newCapWake(t *testing.T, name string) *capWake {
	t.Helper()
	srv := redistest.Start(t)
	ctx := context.Background()
	c := &capWake{admin: srv.Client()}
	waiter := srv.Client()
	waiter.AddHook(&fcallFaults{seen: func(fn string, args []any, _ error) {
		if isCall(fn, args, "grow", "pull") {
			c.pulls.Add(1)
		}
	}})
	opts := &SortedOptions{Options: Options{ManualRequeue: true}}
	var err error
	c.a, err = OpenSorted[string](ctx, waiter, name, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.a.Close() })
	c.b, err = OpenSorted[string](ctx, srv.Client(), name, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.b.Close() })
	return c
}

// setOrderAside adds 1000 strays (IDLE, sorted.lua) to the pull order,
// sorted between "a…" and "z…", and sets the order aside: the queue
// looks empty.
func (c *capWake) setOrderAside(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pipe := c.admin.Pipeline()
	for i := range 1000 {
		pipe.ZAdd(ctx, c.a.keys[5], redis.Z{Member: fmt.Sprintf("m%04d", i)})
	}
	pipe.Rename(ctx, c.a.keys[5], c.a.keys[5]+":aside")
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
}

// putOrderBack waits until a's pull has looked at the queue and is
// waiting, then puts the pull order back, announcing nothing.
func (c *capWake) putOrderBack(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return c.pulls.Load() >= 1 }, 30*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // past its look, waiting
	require.NoError(t, c.admin.Rename(context.Background(), c.a.keys[5]+":aside", c.a.keys[5]).Err())
}

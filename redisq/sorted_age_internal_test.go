package redisq

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// oldestOf returns the handle's Stats.OldestEnqueuedAt, checking that no
// error came with it.
func oldestOf(t *testing.T, s *Sorted[int64]) time.Time {
	t.Helper()
	st, err := s.StatsContext(context.Background())
	require.NoError(t, err)
	require.NoError(t, st.OldestErr)
	return st.OldestEnqueuedAt
}

// TestSortedAgeOlderQueue: a queue written before the age set was kept
// (its keys as those scripts left them: every key but the age set) gives
// no OldestEnqueuedAt while a value published then is pending or leased,
// rather than the age of the values published since, and the right one
// once they are gone.
func TestSortedAgeOlderQueue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	s, err := OpenSorted[int64](ctx, srv.Client(), "age-older", &SortedOptions{Options: Options{Clock: clock, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "old", []byte("a")))
	require.NoError(t, s.Publish(ctx, 2, "old", []byte("b")))
	require.NoError(t, s.rdb.Del(ctx, s.keys[13]).Err()) // as the scripts before the age set left the queue

	clock.Advance(time.Minute)
	at := clock.Now()
	require.NoError(t, s.Publish(ctx, 0, "new", []byte("c")))
	require.Zero(t, oldestOf(t, s), "unknown: values published before the age set are pending")
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Zero(t, oldestOf(t, s), "unknown: values published before the age set are leased")
	for _, b := range bs {
		if b.Key == "new" {
			require.NoError(t, b.Nack(0))
		}
	}
	require.Zero(t, oldestOf(t, s), "unknown still")
	for _, b := range bs {
		if b.Key == "old" {
			require.NoError(t, b.Ack())
		}
	}
	require.True(t, oldestOf(t, s).Equal(at), "the old values are gone: %v, want %v", oldestOf(t, s), at)
}

// TestSortedAgeStaleHead: a member of the age set whose value is gone, or
// dead, or stored with another publish time (left by a handle of an
// earlier version, which keeps no age set, acking or dead-lettering it)
// does not count: Stats passes over it, and housekeeping takes it out.
func TestSortedAgeStaleHead(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	s, err := OpenSorted[int64](ctx, srv.Client(), "age-stale", &SortedOptions{Options: Options{Clock: clock, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	clock.Advance(time.Hour)
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("gone")))   // seq 1
	require.NoError(t, s.Publish(ctx, 1, "b", []byte("dead")))   // seq 2
	require.NoError(t, s.Publish(ctx, 1, "c", []byte("moved")))  // seq 3
	require.NoError(t, s.Publish(ctx, 1, "d", []byte("oldest"))) // seq 4
	at := clock.Now()
	require.True(t, oldestOf(t, s).Equal(at))
	// An earlier version acks seq 1, dead-letters seq 2, and seq 3's record
	// is rewritten with a later time: none of them is the oldest any more.
	require.NoError(t, s.rdb.HDel(ctx, s.keys[1], "1").Err())
	require.NoError(t, s.rdb.ZAdd(ctx, s.keys[11], redis.Z{Score: 2, Member: "2"}).Err())
	raw, err := s.rdb.HGet(ctx, s.keys[1], "3").Result()
	require.NoError(t, err)
	later := []byte(raw)
	i := len(later) - len("moved") - 8 // the publish time's 8 bytes, before the payload's
	binary.BigEndian.PutUint64(later[i:], uint64(at.Add(time.Hour).UnixNano()))
	require.NoError(t, s.rdb.HSet(ctx, s.keys[1], "3", string(later)).Err())
	// Three stale members that sort before seq 4's, with the times of the
	// values as published (the test's clock did not move).
	stale := func(seq uint64) string {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(at.Add(-time.Duration(seq)).UnixNano())^1<<63)
		binary.BigEndian.PutUint64(b[8:], seq)
		return string(b[:])
	}
	for seq := uint64(1); seq <= 3; seq++ {
		require.NoError(t, s.rdb.ZAdd(ctx, s.keys[13], redis.Z{Member: stale(seq)}).Err())
	}
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.NoError(t, st.OldestErr)
	require.True(t, st.OldestEnqueuedAt.Equal(at), "stale members passed over: %v, want %v", st.OldestEnqueuedAt, at)
	_, err = s.RequeueExpired()
	require.NoError(t, err)
	for seq := uint64(1); seq <= 3; seq++ {
		_, err := s.rdb.ZScore(ctx, s.keys[13], stale(seq)).Result()
		require.ErrorIs(t, err, redis.Nil, "housekeeping takes out the stale member of seq %d", seq)
	}
}

// TestSortedAgeUnreadable: a value requeued from the dead set whose
// stored record names no publish time makes Stats say so (OldestErr,
// wrapping queue.ErrCorrupt) instead of giving a later value's age.
func TestSortedAgeUnreadable(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, srv.Client(), "age-unread", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("x")))
	require.NoError(t, s.Publish(ctx, 2, "b", []byte("y")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("look"))
	require.NoError(t, s.rdb.HSet(ctx, s.keys[1], "1", "garbled").Err())
	require.NoError(t, s.RequeueDead(1))
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, st.OldestErr, queue.ErrCorrupt)
	require.ErrorContains(t, st.OldestErr, "value 1")
	require.Zero(t, st.OldestEnqueuedAt)
	// The pull that cannot read it dead-letters it: the age is readable again.
	_, err = s.TryPull(10)
	require.NoError(t, err)
	require.False(t, oldestOf(t, s).IsZero())
}

// TestSortedAgeGarbledMember: a member of the age set that is not the 16
// bytes the scripts write (garbled by hand) names no live value: Stats
// passes over it and housekeeping takes it out. Reading its seq made
// both fail, so that no expired lease was ever returned.
func TestSortedAgeGarbledMember(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	s, err := OpenSorted[int64](ctx, srv.Client(), "age-garbled", &SortedOptions{Options: Options{Clock: clock, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	at := clock.Now()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("x")))
	require.NoError(t, s.rdb.ZAdd(ctx, s.keys[13], redis.Z{Member: "\x00short"}).Err()) // sorts first
	require.True(t, oldestOf(t, s).Equal(at))
	_, err = s.TryPull(1)
	require.NoError(t, err)
	clock.Advance(time.Hour)
	n, err := s.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired lease ends")
	_, err = s.rdb.ZScore(ctx, s.keys[13], "\x00short").Result()
	require.ErrorIs(t, err, redis.Nil, "housekeeping takes the garbled member out")
	require.True(t, oldestOf(t, s).Equal(at))
}

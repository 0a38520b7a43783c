package redisq

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

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

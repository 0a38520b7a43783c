package redisq_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// extremeKeys are message keys at the edges of the server's member
// encoding: empty, NUL bytes, 0xFF bytes, a key that prefixes another.
var extremeKeys = []string{"", "\x00", "\x00\x01", "\xff", "\xff\xff", "a", "a\x00", "a\x00b", "ab"}

// TestSortedExtremesAsEmbedded publishes the same values, at sort keys at
// their extremes under the keys above, to the embedded queue and to
// Redis, and pulls both in small steps, giving some batches back: every
// pull returns the same keys, values and delivery counts in the same
// order on both engines. The seed is printed (WALQ_SEED replays it).
func TestSortedExtremesAsEmbedded(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Run("int64", func(t *testing.T) {
		sorts := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
		sameAsEmbedded(t, rdb, sorts)
	})
	t.Run("uint64", func(t *testing.T) {
		sameAsEmbedded(t, rdb, []uint64{0, 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64})
	})
	t.Run("float64", func(t *testing.T) {
		sorts := []float64{math.Inf(-1), -math.MaxFloat64, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
			math.SmallestNonzeroFloat64, 1, math.MaxFloat64, math.Inf(1)}
		sameAsEmbedded(t, rdb, sorts)
	})
	t.Run("string", func(t *testing.T) {
		sameAsEmbedded(t, rdb, []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "ab", "\xff", "\xff\xff"})
	})
	t.Run("time", func(t *testing.T) {
		sameAsEmbedded(t, rdb, []time.Time{time.Unix(0, math.MinInt64), time.Unix(-1, 0), time.Unix(0, 0),
			time.Unix(0, 1), time.Unix(0, math.MaxInt64)})
	})
}

func sameAsEmbedded[K queue.SortKey](t *testing.T, rdb redis.UniversalClient, sorts []K) {
	seed := rand.Uint64()
	if s := os.Getenv("WALQ_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	ctx := context.Background()
	emb, err := queue.OpenSorted[K](t.TempDir(), &queue.SortedOptions{Options: queue.Options{Sync: queue.SyncNever}})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.OpenSorted[K](ctx, rdb, t.Name(), &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer red.Close()
	engines := []queue.SortedQueue[K]{emb, red}
	for i := range 60 {
		sort, key := sorts[rnd.IntN(len(sorts))], extremeKeys[rnd.IntN(len(extremeKeys))]
		for _, e := range engines {
			require.NoError(t, e.Publish(ctx, sort, key, []byte(fmt.Sprint(i))))
		}
	}
	for step := 0; ; step++ {
		max := 1 + rnd.IntN(5)
		nack := rnd.IntN(3) == 0
		var got [2]string
		for j, e := range engines {
			bs, err := e.TryPull(max)
			if err != nil {
				require.ErrorIs(t, err, queue.ErrEmpty)
			}
			for _, b := range bs {
				got[j] += fmt.Sprintf("%q:", b.Key)
				for _, v := range b.Values {
					got[j] += fmt.Sprintf(" %v/%s/%d", v.Sort, v.Payload, v.Deliveries)
				}
				got[j] += "\n"
				if nack {
					require.NoError(t, b.Nack(0))
				} else {
					require.NoError(t, b.Ack())
				}
			}
		}
		require.Equal(t, got[0], got[1], "pull %d of %d values (embedded, then Redis)", step, max)
		if got[0] == "" {
			return
		}
	}
}

// TestWindowedAsEmbedded runs the same publishes, clock steps (whole
// microseconds: times travel as microseconds on Redis), pulls, acks and
// nacks with delays on a windowed queue of each engine, under one manual
// clock: every pull returns the same keys, values, publish times and
// delivery counts on both. WALQ_SEED replays a run.
func TestWindowedAsEmbedded(t *testing.T) {
	srv := redistest.Start(t)
	seed := rand.Uint64()
	if s := os.Getenv("WALQ_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	clock := queuetest.NewClock()
	const window = 10 * time.Second
	emb, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{Window: window,
		SortedOptions: queue.SortedOptions{Options: queue.Options{Sync: queue.SyncNever, Clock: clock, AckTimeout: time.Minute, MaxDeliveries: 3}}})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.OpenWindowed(ctx, srv.Client(), "windowed-same", &redisq.WindowOptions{Window: window,
		SortedOptions: redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true, Clock: clock, AckTimeout: time.Minute, MaxDeliveries: 3}}})
	require.NoError(t, err)
	defer red.Close()
	engines := []queue.WindowedQueue{emb, red}
	batches := 0
	for step := range 400 {
		switch op := rnd.IntN(10); {
		case op < 4:
			key := extremeKeys[rnd.IntN(len(extremeKeys))]
			for _, e := range engines {
				require.NoError(t, e.Publish(ctx, key, []byte(fmt.Sprint(step))))
			}
		case op < 6:
			clock.Advance(time.Duration(rnd.Int64N(int64(window)/time.Microsecond.Nanoseconds())) * time.Microsecond)
		default:
			max := 1 + rnd.IntN(4)
			settle := rnd.IntN(3)
			delay := time.Duration(rnd.IntN(3)) * time.Second
			var got [2]string
			for j, e := range engines {
				bs, err := e.TryPull(max)
				if err != nil {
					require.ErrorIs(t, err, queue.ErrEmpty)
				}
				for _, b := range bs {
					got[j] += fmt.Sprintf("%q:", b.Key)
					for _, v := range b.Values {
						got[j] += fmt.Sprintf(" %s@%d/%d", v.Payload, v.PublishedAt.UnixNano(), v.Deliveries)
					}
					got[j] += "\n"
					switch settle {
					case 0:
						require.NoError(t, b.Ack())
					case 1:
						require.NoError(t, b.Nack(delay))
					default:
						require.NoError(t, b.DeadLetter("why"))
					}
				}
			}
			require.Equal(t, got[0], got[1], "step %d: pull of %d values (embedded, then Redis)", step, max)
			batches += strings.Count(got[0], "\n")
		}
	}
	t.Logf("%d batches pulled", batches)
	require.NotZero(t, batches)
	es, rs := emb.Stats(), red.Stats()
	require.Equal(t, [3]int{es.SortedPending, es.SortedKeys, es.SortedDead}, [3]int{rs.SortedPending, rs.SortedKeys, rs.SortedDead})
}

package redisq_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// priority is a named sort key type, as users declare them.
type priority int16

// TestSortedOrderMatchesModel: on both engines, for each kind of sort
// key, pulls of one key at a time return the keys in the documented
// order, which a model computes from cmp.Compare: a key's place is its
// smallest pending sort key (a float -0 before +0), keys with equal
// places by the bytes of their names; a batch holds the key's values by
// sort key, equal ones in publish order. Values go back by Nack now and
// then and keep their places. The seed is printed (WALQ_SEED replays it).
func TestSortedOrderMatchesModel(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Run("int64", func(t *testing.T) {
		ext := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
		orderAsModel(t, rdb, cmp.Compare[int64], func(r *rand.Rand) int64 {
			if r.IntN(2) == 0 {
				return ext[r.IntN(len(ext))]
			}
			return r.Int64N(7) - 3
		})
	})
	t.Run("priority", func(t *testing.T) {
		orderAsModel(t, rdb, cmp.Compare[priority], func(r *rand.Rand) priority {
			return []priority{math.MinInt16, -1, 0, 1, math.MaxInt16}[r.IntN(5)]
		})
	})
	t.Run("uint64", func(t *testing.T) {
		ext := []uint64{0, 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
		orderAsModel(t, rdb, cmp.Compare[uint64], func(r *rand.Rand) uint64 { return ext[r.IntN(len(ext))] })
	})
	t.Run("float64", func(t *testing.T) {
		ext := []float64{math.Inf(-1), -math.MaxFloat64, -1.5, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
			math.SmallestNonzeroFloat64, 2.5e-308, 1.5, math.MaxFloat64, math.Inf(1)}
		orderAsModel(t, rdb, cmpFloat[float64], func(r *rand.Rand) float64 { return ext[r.IntN(len(ext))] })
	})
	t.Run("float32", func(t *testing.T) {
		ext := []float32{float32(math.Inf(-1)), -math.MaxFloat32, -1, -math.SmallestNonzeroFloat32,
			float32(math.Copysign(0, -1)), 0, math.SmallestNonzeroFloat32, 1, math.MaxFloat32, float32(math.Inf(1))}
		orderAsModel(t, rdb, cmpFloat[float32], func(r *rand.Rand) float32 { return ext[r.IntN(len(ext))] })
	})
	t.Run("string", func(t *testing.T) {
		ext := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "ab", "é", "\x7f", "\x80", "\xff", "\xff\xff",
			string(make([]byte, 300)) + "z"}
		orderAsModel(t, rdb, cmp.Compare[string], func(r *rand.Rand) string { return ext[r.IntN(len(ext))] })
	})
	t.Run("time", func(t *testing.T) {
		ext := []time.Time{time.Unix(0, math.MinInt64), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(-1, 999_999_999),
			time.Unix(0, 0), time.Unix(0, 1), time.Date(2200, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)), time.Unix(0, math.MaxInt64)}
		orderAsModel(t, rdb, func(a, b time.Time) int { return a.Compare(b) }, func(r *rand.Rand) time.Time { return ext[r.IntN(len(ext))] })
	})
}

// cmpFloat is cmp.Compare with -0 before +0, as the documented order has it.
func cmpFloat[F float32 | float64](a, b F) int {
	if a == 0 && b == 0 {
		return -cmp.Compare(bitSign(a), bitSign(b))
	}
	return cmp.Compare(a, b)
}

func bitSign[F float32 | float64](f F) int {
	if math.Signbit(float64(f)) {
		return 1
	}
	return 0
}

// modelValue is a value as the model holds it.
type modelValue[K queue.SortKey] struct {
	sort    K
	key     string
	seq     int // publish order
	payload string
}

func orderAsModel[K queue.SortKey](t *testing.T, rdb redis.UniversalClient, cmpK func(a, b K) int, gen func(*rand.Rand) K) {
	seed := rand.Uint64()
	if s := os.Getenv("WALQ_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	ctx := context.Background()
	emb, err := queue.OpenSorted[K](t.TempDir(), &queue.SortedOptions{Options: queue.Options{Sync: queue.SyncNever, MaxDeliveries: -1}})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.OpenSorted[K](ctx, rdb, t.Name(), &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true, MaxDeliveries: -1}})
	require.NoError(t, err)
	defer red.Close()
	for name, q := range map[string]queue.SortedQueue[K]{"embedded": emb, "redis": red} {
		rnd := rand.New(rand.NewPCG(seed, 0))
		var model []modelValue[K]
		keys := []string{"", "\x00", "a", "a\x00", "b", "\xff"}
		for i := range 80 {
			v := modelValue[K]{sort: gen(rnd), key: keys[rnd.IntN(len(keys))], seq: i, payload: strconv.Itoa(i)}
			require.NoError(t, q.Publish(ctx, v.sort, v.key, []byte(v.payload)), "%s: publish %d", name, i)
			model = append(model, v)
		}
		for step := 0; len(model) > 0; step++ {
			want := modelHead(model, cmpK)
			bs, err := q.TryPull(1)
			require.NoError(t, err, "%s: pull %d", name, step)
			require.Len(t, bs, 1)
			var got []string
			for _, v := range bs[0].Values {
				got = append(got, string(v.Payload))
			}
			var wantPayloads []string
			for _, v := range want {
				wantPayloads = append(wantPayloads, v.payload)
			}
			require.Equal(t, fmt.Sprintf("%q: %v", want[0].key, wantPayloads), fmt.Sprintf("%q: %v", bs[0].Key, got),
				"%s: pull %d (seed %d)", name, step, seed)
			for i, v := range bs[0].Values {
				require.Zero(t, cmpK(want[i].sort, v.Sort), "%s: pull %d: value %d's sort key %v, published %v", name, step, i, v.Sort, want[i].sort)
			}
			if rnd.IntN(3) == 0 && step < 200 {
				require.NoError(t, bs[0].Nack(0))
				continue
			}
			require.NoError(t, bs[0].Ack())
			model = slices.DeleteFunc(model, func(v modelValue[K]) bool { return v.key == want[0].key })
		}
		_, err := q.TryPull(10)
		require.ErrorIs(t, err, queue.ErrEmpty, name)
	}
}

// modelHead returns the values of the key a pull takes first, in batch
// order.
func modelHead[K queue.SortKey](model []modelValue[K], cmpK func(a, b K) int) []modelValue[K] {
	byValue := func(a, b modelValue[K]) int { return cmp.Or(cmpK(a.sort, b.sort), cmp.Compare(a.seq, b.seq)) }
	first := map[string]modelValue[K]{}
	for _, v := range model {
		if f, ok := first[v.key]; !ok || byValue(v, f) < 0 {
			first[v.key] = v
		}
	}
	var head *modelValue[K]
	for _, f := range first {
		if head == nil || cmp.Or(cmpK(f.sort, head.sort), cmp.Compare(f.key, head.key)) < 0 {
			head = &f
		}
	}
	var out []modelValue[K]
	for _, v := range model {
		if v.key == head.key {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, byValue)
	return out
}

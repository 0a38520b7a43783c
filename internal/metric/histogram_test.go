package metric

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucketBounds(t *testing.T) {
	cases := []struct {
		v    uint64
		want int
	}{
		{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {1024, 10}, {1025, 11},
		{1 << 31, 31}, {1<<31 + 1, Buckets}, {math.MaxUint64, Buckets},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, bucket(c.v), "value %d", c.v)
	}
}

// TestUnitsRoundUp: a value bucketed by its whole coarse units would be
// counted under a bound below it (1.5 ms under le=1 ms).
func TestUnitsRoundUp(t *testing.T) {
	for _, c := range []struct{ v, unit, want uint64 }{
		{0, 1000, 0}, {1, 1000, 1}, {1000, 1000, 1}, {1001, 1000, 2}, {1_500_000, 1e6, 2},
		{math.MaxUint64, 1, math.MaxUint64}, {math.MaxUint64, 1000, math.MaxUint64/1000 + 1},
	} {
		assert.Equal(t, c.want, Units(c.v, c.unit), "Units(%d, %d)", c.v, c.unit)
	}
}

func TestSnapshotScalesAndCounts(t *testing.T) {
	var h Histogram
	h.Observe(3, 3000) // 3 µs, 3000 ns
	h.Observe(1000, 1_000_000)
	h.Observe(1000, 1_000_000)
	s := h.Snapshot(1e-6, 1e-9)
	require.Len(t, s.Bounds, Buckets)
	require.Len(t, s.Counts, Buckets+1)
	assert.Equal(t, uint64(3), s.Count)
	assert.InDelta(t, 0.002003, s.Sum, 1e-12)
	assert.Equal(t, uint64(1), s.Counts[2])
	assert.Equal(t, uint64(2), s.Counts[10])
	assert.InDelta(t, 4e-6, s.Bounds[2], 1e-15)
	assert.InDelta(t, 1024e-6, s.Quantile(0.5), 1e-12)
	assert.InDelta(t, 4e-6, s.Quantile(0.1), 1e-15)
}

func TestQuantileEmptyAndOverflow(t *testing.T) {
	var h Histogram
	assert.Equal(t, 0.0, h.Snapshot(1, 1).Quantile(0.99))
	h.Observe(math.MaxUint64, 0)
	assert.True(t, math.IsInf(h.Snapshot(1, 1).Quantile(0.99), 1))
}

func TestObserveConcurrently(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < 1000; i++ {
				h.Observe(i, 1)
			}
		}()
	}
	wg.Wait()
	s := h.Snapshot(1, 1)
	var total uint64
	for _, c := range s.Counts {
		total += c
	}
	assert.Equal(t, uint64(4000), s.Count)
	assert.Equal(t, uint64(4000), total)
	assert.Equal(t, 4000.0, s.Sum)
}

// BenchmarkObserve is the price of one observation on the hot path.
func BenchmarkObserve(b *testing.B) {
	var h Histogram
	for i := range b.N {
		h.Observe(uint64(i), uint64(i))
	}
}

// BenchmarkAtomicAdd is one atomic add, the unit BenchmarkObserve is
// measured against (Observe makes three).
func BenchmarkAtomicAdd(b *testing.B) {
	var n atomic.Uint64
	for i := range b.N {
		n.Add(uint64(i))
	}
}

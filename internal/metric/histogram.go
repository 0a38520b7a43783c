package metric

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Buckets is how many finite buckets a Histogram has: bucket i counts the
// values v with 2^(i-1) < v <= 2^i (bucket 0: v <= 1). Values above
// 2^(Buckets-1) go to an overflow bucket.
const Buckets = 32

// Histogram counts non-negative integer values in power-of-two buckets.
type Histogram struct {
	counts [Buckets + 1]atomic.Uint64 // per bucket, not cumulative; the last is the overflow
	count  atomic.Uint64              // values observed
	sum    atomic.Uint64              // their sum, in the caller's unit (wraps after 2^64)
}

// Observe records v in the bucket whose upper bound is the smallest power
// of two at or above it; value is what the sum adds (the caller may bucket
// a coarse unit and sum a finer one: it then buckets Units(value, unit),
// rounded up, so that a bucket's bound stays an upper bound of the values
// it counts).
func (h *Histogram) Observe(v, value uint64) {
	h.counts[bucket(v)].Add(1)
	h.count.Add(1)
	h.sum.Add(value)
}

// Units returns how many units v, counted in a finer unit, takes, rounded
// up: Units(1_000_500, 1000) is 1001 (µs of 1,000,500 ns).
func Units(v, unit uint64) uint64 {
	n := v / unit
	if v%unit != 0 {
		n++
	}
	return n
}

// bucket returns the index of v's bucket.
func bucket(v uint64) int {
	if v <= 1 {
		return 0
	}
	return min(bits.Len64(v-1), Buckets)
}

// Snapshot is a copy of a Histogram's figures, scaled to a unit.
type Snapshot struct {
	Bounds []float64 // inclusive upper bound of each finite bucket, ascending
	Counts []uint64  // per bucket, not cumulative; len(Bounds)+1, the last counts values above every bound
	Count  uint64    // values observed
	Sum    float64   // their sum
}

// Snapshot returns the figures with every bucket bound multiplied by
// boundUnit and the sum by sumUnit (1e-6 and 1e-9 turn microsecond buckets
// and a nanosecond sum into seconds).
func (h *Histogram) Snapshot(boundUnit, sumUnit float64) Snapshot {
	s := Snapshot{Bounds: make([]float64, Buckets), Counts: make([]uint64, Buckets+1)}
	for i := range s.Bounds {
		s.Bounds[i] = float64(uint64(1)<<i) * boundUnit
	}
	for i := range s.Counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Count = h.count.Load()
	s.Sum = float64(h.sum.Load()) * sumUnit
	return s
}

// Quantile estimates the q-quantile (0 < q <= 1) as the upper bound of the
// bucket that holds it; 0 when nothing was observed, +Inf past every bound.
func (s Snapshot) Quantile(q float64) float64 {
	var total uint64
	for _, c := range s.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen >= max(rank, 1) && i < len(s.Bounds) {
			return s.Bounds[i]
		}
	}
	return math.Inf(1)
}

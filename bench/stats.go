package main

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// hist is a latency histogram with about 3% resolution: values below
// histSub ns get a bucket each, larger ones fall in one of histSub buckets
// per power of two. It is not safe for concurrent use; each goroutine keeps
// its own and merges at the end.
type hist struct {
	counts [64 * histSub]uint64 // index from histIndex
	n      uint64               // values recorded
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits
)

// histIndex and histValue are mirrors: histValue(histIndex(v)) is the
// smallest value of v's bucket.
func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	exp := bits.Len64(v) - 1 - histSubBits // v >> exp is in [histSub, 2*histSub)
	return (exp+1)*histSub + int(v>>exp) - histSub
}

func histValue(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	exp := i/histSub - 1
	return uint64(i%histSub+histSub) << exp
}

func (h *hist) record(d time.Duration) {
	h.counts[histIndex(uint64(max(d, 0)))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the value below which a fraction q of the values lie, or
// 0 for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= max(rank, 1) {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(len(h.counts) - 1))
}

// median returns the median of xs, or NaN for none; xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// minMax returns the smallest and largest of xs, NaN for none.
func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

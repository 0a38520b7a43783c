package main

import (
	"math"
	"testing"
	"time"
)

func TestHistIndexMirrorsValue(t *testing.T) {
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 65, 1000, 123456789, 1 << 40, math.MaxInt64} {
		i := histIndex(v)
		lo := histValue(i)
		if lo > v {
			t.Errorf("histValue(histIndex(%d)) = %d, above the value", v, lo)
		}
		if i+1 < len(hist{}.counts) && histValue(i+1) <= v {
			t.Errorf("value %d belongs to a later bucket than %d", v, i)
		}
	}
}

func TestHistQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"p50", 0.50, 500 * time.Microsecond},
		{"p99", 0.99, 990 * time.Microsecond},
		{"max", 1, 1000 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.quantile(tt.q)
			if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 0.04 {
				t.Errorf("quantile(%v) = %v, want %v within 4%%", tt.q, got, tt.want)
			}
		})
	}
	var empty hist
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}
}

func TestMedianMinMax(t *testing.T) {
	tests := []struct {
		name   string
		xs     []float64
		median float64
		lo, hi float64
	}{
		{"odd", []float64{3, 1, 2}, 2, 1, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5, 1, 4},
		{"one", []float64{7}, 7, 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.xs); got != tt.median {
				t.Errorf("median = %v, want %v", got, tt.median)
			}
			if lo, hi := minMax(tt.xs); lo != tt.lo || hi != tt.hi {
				t.Errorf("minMax = %v, %v, want %v, %v", lo, hi, tt.lo, tt.hi)
			}
		})
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median(nil) is not NaN")
	}
}

func TestRatioIsPerRound(t *testing.T) {
	// The system does half the reference's rate in both rounds, although
	// the rounds differ tenfold: the ratio must be 0.5, not a ratio of
	// medians or of sums.
	a := []sample{{Ops: 50, Elapsed: time.Second}, {Ops: 500, Elapsed: time.Second}}
	b := []sample{{Ops: 100, Elapsed: time.Second}, {Ops: 1000, Elapsed: time.Second}}
	if got := ratio(a, b); got != 0.5 {
		t.Errorf("ratio = %v, want 0.5", got)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"100", 100}, {"1KiB", 1024}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}, {"1.5G", 3 << 29}, {"4K", 4096},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("parseSize(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
			}
			if back, _ := parseSize(sizeString(got)); back != got {
				t.Errorf("sizeString(%d) = %q does not parse back", got, sizeString(got))
			}
		})
	}
	if _, err := parseSize("lots"); err == nil {
		t.Error(`parseSize("lots") succeeded`)
	}
}

package sortkey_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/sortkey"
)

// TestEncodeTimeRange: a time is kept as UnixNano in an int64, so one
// outside the years 1678 to 2262 would wrap into another time (the zero
// time into 1754, 9999-12-31 into 1816). Encode refuses it; the first
// and last representable nanoseconds round-trip in order.
func TestEncodeTimeRange(t *testing.T) {
	for _, c := range []struct {
		name string
		at   time.Time
	}{
		{"zero", time.Time{}},
		{"1600", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"before-first", sortkey.MinTime.Add(-1)},
		{"after-last", sortkey.MaxTime.Add(1)},
		{"2263", time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"9999", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := sortkey.Encode(c.at)
			require.ErrorIs(t, err, sortkey.ErrTimeRange)
			require.Nil(t, b)
		})
	}
	edges := []time.Time{time.Unix(0, math.MinInt64), time.Unix(1_800_000_000, 0), time.Unix(0, math.MaxInt64)}
	var prev []byte
	for i, at := range edges {
		b, err := sortkey.Encode(at)
		require.NoError(t, err, "edge %d", i)
		back, err := sortkey.Decode[time.Time](b)
		require.NoError(t, err)
		require.True(t, back.Equal(at), "edge %d: decoded %v, encoded %v", i, back, at)
		require.Negative(t, bytes.Compare(prev, b), "edge %d out of order", i)
		prev = b
	}
	require.True(t, sortkey.MinTime.Equal(edges[0]))
	require.True(t, sortkey.MaxTime.Equal(edges[2]))
}

// TestEncodeNaN: a NaN has no order and is refused.
func TestEncodeNaN(t *testing.T) {
	_, err := sortkey.Encode(math.NaN())
	require.ErrorIs(t, err, sortkey.ErrNaN)
	_, err = sortkey.Encode(float32(math.NaN()))
	require.ErrorIs(t, err, sortkey.ErrNaN)
}

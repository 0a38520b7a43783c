package queue

import (
	"math"
	"time"
)

// later returns now+d in unix nanoseconds, or the last instant an int64
// holds (in the year 2262) when the sum would pass it: a delay, nack
// delay, lease or window that long means "not for a very long time",
// never a time that wrapped into the past.
func later(now int64, d time.Duration) int64 {
	if d > 0 && now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}

// unixNano is t.UnixNano, clamped to what an int64 holds (the years 1678
// to 2262) instead of wrapping: a deliver-at time past them is the last
// instant, one before them the first.
func unixNano(t time.Time) int64 {
	switch {
	case t.After(maxTimeKey):
		return math.MaxInt64
	case t.Before(minTimeKey):
		return math.MinInt64
	}
	return t.UnixNano()
}

// delayDue returns due, the time a delay ends (unix ns), as an enqueue's or
// a nack's record holds it: Due 0 there means no delay, and any other value,
// negative before 1970, a delay; a delay that ends at the unix epoch exactly
// is held one nanosecond longer.
func delayDue(due int64) int64 {
	if due == 0 {
		return 1
	}
	return due
}

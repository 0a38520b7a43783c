package redisq

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// micros renders a duration as the scripts' microseconds, rounded down,
// for tests that call the functions with arguments of their own.
func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// TestSpanRoundsUp: what ends d after now is handed to the scripts as the
// microseconds from now as they read it (rounded down) to now+d rounded
// up, so that it ends no earlier than now+d and less than a microsecond
// after; 0 stays 0. A due time is rounded up the same way.
func TestSpanRoundsUp(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Duration // after base
		d    time.Duration
		want int64
	}{
		{0, 0, 0},
		{300, 0, 0},
		{0, 1, 1},
		{0, time.Microsecond, 1},
		{0, 1500, 2},
		{300, 1, 1},
		{300, 700, 1},
		{300, 701, 2},
		{300, time.Microsecond, 2},
		{999, 1, 1},
		{999, 2, 2},
		{0, 10*time.Second + 500, 10_000_001},
		{0, math.MaxInt64, math.MaxInt64/1000 + 1},
	} {
		now := base.Add(c.now)
		got, err := strconv.ParseInt(span(now, c.d), 10, 64)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "now base+%v, d %v", c.now, c.d)
		if c.d > 0 {
			end := time.UnixMicro(now.UnixMicro() + got)
			require.False(t, end.Before(now.Add(c.d)), "ends before now+d")
			require.Less(t, end.Sub(now.Add(c.d)), time.Microsecond, "ends a microsecond or more late")
		}
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{base, strconv.FormatInt(base.UnixMicro(), 10)},
		{base.Add(1), strconv.FormatInt(base.UnixMicro()+1, 10)},
		{base.Add(999), strconv.FormatInt(base.UnixMicro()+1, 10)},
		{time.Unix(-1, 500), "-999999"},
		{time.Unix(0, -1), "0"},
		{time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), strconv.FormatInt(farMicros, 10)},
	} {
		require.Equal(t, c.want, dueMicros(c.at), "due %v", c.at)
	}
}

// TestWakeFromMsgKey: the calls of the one-message functions carry no
// channel, which they derive from the name of the msg key (publish in
// scripts/common.lua: the name less "2:msg", then "wake").
func TestWakeFromMsgKey(t *testing.T) {
	for _, name := range []string{"jobs", "a:b:c", "ünïcode", "2:msg"} {
		k := newKeys(name)
		msg := k.all[1]
		require.Equal(t, k.wake, msg[:len(msg)-len("2:msg")]+"wake", name)
	}
}

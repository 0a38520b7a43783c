package redisq

import (
	"strconv"
	"time"
)

// keys are the Redis keys of one queue, in the order the scripts take
// them (scripts/common.lua), all under the hash tag {name}.
type keys struct {
	all  []string // KEYS of every script
	wake string   // the pub/sub channel of ready messages ('r') and timers ('t')
}

func newKeys(name string) keys {
	p := "walq:{" + name + "}:"
	var k keys
	for _, s := range []string{"seq", "info", "body", "ready", "delayed", "lease", "dead", "byid", "acked", "stats"} {
		k.all = append(k.all, p+s)
	}
	k.wake = p + "wake"
	return k
}

// micros renders a duration or a time as the scripts' microseconds.
func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func unixMicros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

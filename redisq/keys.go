package redisq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// layout is the version of the ack queue's stored layout, part of every
// key's name: walq:{name}:<layout>:<key>. Layout 1 (keys walq:{name}:<key>)
// kept a message in three hashes (info, body, byid); layout 2 keeps it in
// the fields of one hash (msg), so that one command writes, reads or
// removes it. A handle never reads or writes another layout's keys, and
// Open refuses a queue that still holds layout 1 (ErrLayout).
const layout = "2"

// keys are the Redis keys of one queue, in the order the scripts take
// them (scripts/common.lua), all under the hash tag {name}.
type keys struct {
	all  []string // KEYS of every script
	wake string   // the pub/sub channel of ready messages ('r') and timers ('t')
	old  string   // layout 1's sequence counter, present while a queue of that layout exists
}

func newKeys(name string) keys {
	p := "walq:{" + name + "}:"
	var k keys
	for _, s := range []string{"seq", "msg", "ready", "delayed", "lease", "dead", "acked", "stats"} {
		k.all = append(k.all, p+layout+":"+s)
	}
	k.wake = p + "wake"
	k.old = p + "seq"
	return k
}

// checkLayout refuses a queue that holds layout 1: its messages would be
// invisible to this handle, and a handle of the older version would not
// see the messages of this one.
func (k keys) checkLayout(ctx context.Context, h *handle, name string) error {
	found, err := h.present(ctx, k.old)
	if err != nil {
		return fmt.Errorf("redisq: queue %q: look for an older layout: %w", name, err)
	}
	if found {
		return fmt.Errorf("%w: queue %q holds layout 1 (key %s exists): drain it with the redisq version that wrote it, "+
			"then delete its keys walq:{%s}:NAME for NAME in %s", ErrLayout, name, k.old, name, oldKeys)
	}
	return nil
}

// present tells whether the string key exists. It reads it with GET, not
// EXISTS: a user whose ACL grants the data commands by category
// (+@string +@hash ...) may lack @keyspace. A key of another type
// exists too. It reads the queue's master (primary), looked up again for
// each send; a GET that meets a dropped connection or a failover is sent
// again (rideAgain).
func (h *handle) present(ctx context.Context, key string) (bool, error) {
	err := h.rideAgain(ctx, func(ctx context.Context) error { return h.primary(ctx).Get(ctx, key).Err() })
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err == nil || strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return true, nil
	}
	return false, err
}

// oldKeys are the names of layout 1's keys.
const oldKeys = "seq info body ready delayed lease dead byid acked stats"

// span renders d, a delay or lease that starts at now, as the
// microseconds the scripts add to now as they read it (unixMicros,
// rounded down) to reach now+d rounded up to a whole microsecond: what
// ends d after now ends no earlier on the server than on the embedded
// queue, and less than a microsecond later. A d of 0 (a nack "at once")
// stays 0.
func span(now time.Time, d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatInt(ceilMicros(now.Add(d))-now.UnixMicro(), 10)
}

// ceilMicros is t in Unix microseconds, rounded up.
func ceilMicros(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

// windowMicros renders a dedup window in whole microseconds, rounded up:
// a window of a fraction of one still refuses the ids acked within it,
// so the scripts refuse every id the embedded queue refuses (and, at
// the edge, up to a microsecond more).
func windowMicros(d time.Duration) string {
	us := d.Microseconds()
	if d%time.Microsecond > 0 {
		us++ // no overflow: us is at most MaxInt64/1000
	}
	return strconv.FormatInt(us, 10)
}

func unixMicros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// farMicros (2^60 µs, in the year 38,503) is the latest due time the
// scripts are given: a later deliver-at, whose UnixMicro could wrap into
// the past, is clamped to it. It lies after every clock plus any
// time.Duration, a double holds it exactly (so it comes back unchanged
// from a ZADD score, a reply and the scripts' '%d'), and it is below the
// scripts' NONE (2^62) and what a C long holds.
const farMicros = 1 << 60

// dueMicros renders a due time or lease deadline as the scripts'
// microseconds, rounded up (a time between two whole microseconds is due
// at the later one, never before itself) and clamped to farMicros.
func dueMicros(t time.Time) string {
	if t.After(time.UnixMicro(farMicros)) {
		return strconv.FormatInt(farMicros, 10)
	}
	return strconv.FormatInt(ceilMicros(t), 10)
}

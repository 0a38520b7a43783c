package redisq

import (
	"context"
	"fmt"
	"strings"
)

// ackTypes and sortedTypes are the Redis types of a queue's keys, in the
// order of its scripts' KEYS (keys.go, sorted.go).
var (
	ackTypes    = []string{"string", "hash", "zset", "zset", "zset", "zset", "zset", "hash"}
	sortedTypes = []string{"string", "hash", "hash", "hash", "zset", "zset", "hash", "hash", "zset", "hash", "zset", "zset", "hash", "zset"}
)

// wrongType adds to err, the server's own WRONGTYPE error of a call,
// which key of the queue holds another type: the scripts check the keys
// they touch after their first write themselves (need in
// scripts/common.lua), and the others fail the call with this error
// before anything is written, which does not name the key. It names the
// key only when the server answers TYPE, that is when the scripts' own
// checks ran, so its "left as it was" holds; where TYPE is refused the
// error is returned as the server gave it (see the ACL note in doc.go).
func (h *handle) wrongType(ctx context.Context, err error) error {
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE Operation against") || len(h.types) != len(h.keys) {
		return err
	}
	pipe := h.rdb.Pipeline()
	cmds := make([]interface{ Val() string }, len(h.keys))
	for i, k := range h.keys {
		cmds[i] = pipe.Type(ctx, k)
	}
	if _, perr := pipe.Exec(ctx); perr != nil {
		return err
	}
	var bad []string
	for i, c := range cmds {
		if t := c.Val(); t != "none" && t != h.types[i] {
			bad = append(bad, fmt.Sprintf("queue key %s holds a %s, not a %s", h.keys[i], t, h.types[i]))
		}
	}
	if len(bad) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s: the queue is left as it was; restore the key to go on)", err, strings.Join(bad, "; "))
}

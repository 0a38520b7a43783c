package redisq

import (
	"context"
	"fmt"

	"github.com/walq/walq/queue"
)

// checkACL refuses (queue.ErrInvalidOptions) a client whose user the
// server's ACL refuses a command the library's functions run, on the
// queue's keys or channel: Redis checks a function's commands only as it
// runs them, and a refusal after the function's first write (a pop, the
// end of a lease) would leave a half-done change, since Redis does not
// undo a function's writes. f is the library's probe (scripts/probe.lua),
// which runs each command on each key the functions run it on (so an ACL
// selector granting a command on some keys only is judged key by key),
// in a function flagged no-writes: the server checks a command against
// the ACL before it refuses a write there, so the probe writes nothing.
// That order is the server's (Redis 7's scriptCall), relied on here and
// pinned by TestACLProbeRefusesEachWrite; a no-writes function runs past
// maxmemory too. argv are the arguments a call of the library takes
// first. The probe's FCALL names every key of the queue, so a user
// refused one of them, for reading or writing, is refused before the
// function runs.
// With reads, the probe runs only the commands that write nothing: a
// ReadOnly handle runs no function that writes.
func (h *handle) checkACL(ctx context.Context, f function, argv []any, reads bool) error {
	if reads {
		argv = append(argv[:len(argv):len(argv)], "r")
	}
	var v any
	err := h.rideAgain(ctx, func(ctx context.Context) (err error) { v, err = h.fcall(ctx, f, argv); return err }) // no-writes
	// The ack queue's probe looks for lost keys and another layout's
	// mark once the ACL passes (intact, scripts/common.lua).
	for _, code := range []string{"LOSTKEY", "LAYOUT"} {
		if _, ok := replyAfter(err, code); ok {
			return scriptErr("open", err)
		}
	}
	if err != nil {
		return fmt.Errorf("redisq: check the ACL with %s: %w", f.name, err)
	}
	if s, _ := v.(string); s != "" {
		return fmt.Errorf("%w: redisq: the server's ACL refuses %s; the queue's functions run it: grant it (see the package documentation)",
			queue.ErrInvalidOptions, s)
	}
	return nil
}

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
// which tries each command in a form that leaves every key as it was;
// argv are the arguments a call of the library takes first.
func (h *handle) checkACL(ctx context.Context, f function, argv []any) error {
	v, err := h.rdb.FCall(ctx, f.name, h.keys, argv...).Result()
	if err != nil {
		return fmt.Errorf("redisq: check the ACL with %s: %w", f.name, err)
	}
	if s, _ := v.(string); s != "" {
		return fmt.Errorf("%w: redisq: the server's ACL refuses %s; the queue's functions run it: grant it (see the package documentation)",
			queue.ErrInvalidOptions, s)
	}
	return nil
}

package redisq

import (
	"context"
	"fmt"
	"strings"

	"github.com/walq/walq/queue"
)

// checkWritable refuses (queue.ErrInvalidOptions) a server that is a
// read-only replica: it holds the libraries by replication and runs the
// check of the ACL (a no-writes function), but would refuse every
// enqueue, pull and ack (READONLY). f is the library's function that
// writes nothing yet is flagged as one that may write (and allow-oom, so
// that it runs past maxmemory as acks do): the server refuses its FCALL
// on a read-only replica before it runs it. argv are the arguments a call
// of the library takes first. Another refusal of a write (MISCONF,
// NOREPLICAS) is returned as it is: the queue's calls would meet it too.
func (h *handle) checkWritable(ctx context.Context, f function, argv []any) error {
	_, err := h.fcall(ctx, f, argv)
	switch {
	case err == nil:
		return nil
	case strings.HasPrefix(err.Error(), "READONLY"):
		return fmt.Errorf("%w: redisq: the server is a read-only replica (%v): open the queue on its master",
			queue.ErrInvalidOptions, err)
	}
	return fmt.Errorf("redisq: check that the server takes writes with %s: %w", f.name, err)
}

package redisq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/walq/walq/queue"
)

// checkWritable refuses (queue.ErrInvalidOptions) a server that is a
// read-only replica: it holds the libraries by replication and runs the
// check of the ACL (a no-writes function), but would refuse every
// enqueue, pull and ack (READONLY). f is the library's function that
// writes nothing yet is flagged as one that may write (and allow-oom, so
// that it runs past maxmemory as acks do): the server refuses its FCALL
// on a read-only replica before it runs it. argv are the arguments a call
// of the library takes first. A master that refuses writes for a while
// (MISCONF after a failed save, NOREPLICAS while min-replicas-to-write is
// unmet) passes: the queue's calls report the refusal until it clears, so
// a service can start meanwhile. A user whose ACL refuses the call
// (NOPERM: no FCALL, or the queue's keys granted for reading only, which
// the call names for writing) is refused, saying what to grant and that a
// ReadOnly handle reads the queue.
func (h *handle) checkWritable(ctx context.Context, f function, argv []any) error {
	err := h.rideAgain(ctx, func(ctx context.Context) error { _, err := h.fcall(ctx, f, argv); return err }) // it writes nothing
	switch {
	case err == nil, refusedFor(err, "MISCONF"), refusedFor(err, "NOREPLICAS"):
		return nil
	case refusedFor(err, "READONLY"):
		return onReplica(err, false)
	case refusedFor(err, "NOPERM"):
		return noWrites(h.keys[0], err)
	}
	return fmt.Errorf("redisq: check that the server takes writes with %s: %w", f.name, err)
}

// onReplica is Open's error for a server that is a read-only replica; err
// is its refusal. A ReadOnly handle (reader) is refused only where the
// replica lacks the library, which it cannot load.
func onReplica(err error, reader bool) error {
	if reader {
		return fmt.Errorf("%w: redisq: the server is a read-only replica without this version's function library, "+
			"which it cannot load (%v): open a handle of this version on its master once, which loads it there "+
			"for its replicas, or read the master", queue.ErrInvalidOptions, err)
	}
	return fmt.Errorf("%w: redisq: the server is a read-only replica (%v): open the queue on its master",
		queue.ErrInvalidOptions, err)
}

// noWrites is Open's error for a user whose ACL refuses a handle that
// writes; key is one of the queue's keys and err the refusal, kept in the
// chain for errors.As. It adds that a ReadOnly handle reads the queue.
func noWrites(key string, err error) error {
	pattern := key
	if i := strings.Index(key, "}"); i >= 0 {
		pattern = key[:i+1] + "*"
	}
	return fmt.Errorf("%w: redisq: the server's ACL refuses this user a handle that writes (%w): grant it FCALL "+
		"and the queue's keys (%s) and channel for writing, with the commands the package documentation lists, "+
		"or open the queue with Options.ReadOnly to read it",
		queue.ErrInvalidOptions, err, pattern)
}

// refusedFor says whether err, however wrapped, is the server's error
// reply with the given code (its first word).
func refusedFor(err error, code string) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), code+" ")
}

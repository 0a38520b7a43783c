package redisq

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// sentAlone returns the error, err, of a call that carried a change and
// ran under its caller's context ctx (a lone Enqueue's, an
// EnqueueBatch's, a sorted or windowed Publish's) as ErrMayHaveRun where
// ctx ended while the call waited for its reply: the client stopped
// waiting after a send the server may run (readTimedOut). On a client
// that sends again itself (h.resends) also where ctx ended the client's
// wait before its next send, which returns ctx's error alone: its last
// send may have run. A call that the server refused or that was never
// sent (unrun: a dial's error, the pool's timeout, a new connection
// whose setup failed before the call was written), whose rides ended
// with ctx, did not run: its error is returned as it is.
func (h *handle) sentAlone(ctx context.Context, err error) error {
	if err == nil || h.unrun(err) || !readTimedOut(err) && !(h.resends && errors.Is(err, ctx.Err())) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMayHaveRun, err)
}

// readTimedOut reports whether err is a wait for a reply that the
// client ended once the call's context ended: a read's timeout (at the
// context's deadline with go-redis's ContextTimeoutEnabled, else at its
// ReadTimeout), in which timedOut has wrapped the context's error.
func readTimedOut(err error) bool {
	return connTimedOut(err) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// connTimedOut reports whether err holds a timeout of a connection's
// read or write: a net.Error that timed out, other than the context's
// own DeadlineExceeded (a net.Error too), which go-redis returns alone
// for a wait that the context ended before the call was written (for a
// connection of the pool, for its dial).
func connTimedOut(err error) bool {
	if ne, ok := err.(net.Error); ok && ne.Timeout() && err != context.DeadlineExceeded {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return connTimedOut(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if connTimedOut(e) {
				return true
			}
		}
	}
	return false
}

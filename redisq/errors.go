package redisq

import "errors"

// ErrNotDurable is returned when fewer than Options.Replicas replicas
// acknowledged a change within Options.WaitTimeout. The change was made
// and may survive; it is not known to be on the replicas.
var ErrNotDurable = errors.New("redisq: not acknowledged by enough replicas")

// ErrMayHaveRun is returned, wrapping the context's error, when a
// caller's context ended while the server may be running, or may have
// run, the call that carried its change: an Enqueue (its id comes with
// the error) whose message may be enqueued, sent together with others
// and left while their call was in flight, or sent alone and its client
// stopped waiting for the reply once its context ended (or, on a client
// that sends a command again itself, its context ended the client's wait
// to send it again); an EnqueueBatch (its ids come with the error) that
// ended so, all of whose messages may be enqueued, or none; a sorted or
// windowed Publish that ended so, whose value may be published (it has
// no id: a Publish sent again publishes it twice if the first ran).
// A change that the server refused, or that was never sent (its
// connection could not be made, or failed while the client set it up:
// HELLO, CLIENT SETINFO), is reported by the context's error
// alone. The embedded queue has no such error:
// once it appended a change's record it waits for its write and fsync
// whatever the context, and reports the change as made.
var ErrMayHaveRun = errors.New("redisq: the context ended while the call that carried the change was in flight: it may have run")

// ErrLayout is returned by Open when the queue's keys hold a stored
// layout other than this version's, and by any call of an ack queue's
// handle once a later release marked the queue as its own (see the
// package documentation): handles of different layouts must never
// share a queue.
var ErrLayout = errors.New("redisq: the queue's keys hold another layout")

// replied tells whether a call that returned v and err has a reply to
// read: none failed, or only the WAIT after it did (ErrNotDurable, with
// the reply of the change the call made). What the reply says was not
// done (a stale receipt, a duplicate) must be reported as such, and what
// it leased must reach the caller.
func replied(v any, err error) bool {
	return err == nil || v != nil && errors.Is(err, ErrNotDurable)
}

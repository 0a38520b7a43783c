package redisq

import "errors"

// ErrNotDurable is returned when fewer than Options.Replicas replicas
// acknowledged a change within Options.WaitTimeout. The change was made
// and may survive; it is not known to be on the replicas.
var ErrNotDurable = errors.New("redisq: not acknowledged by enough replicas")

// ErrLayout is returned by Open when the queue's keys hold a stored
// layout other than this version's (see the package documentation):
// handles of different layouts must never share a queue.
var ErrLayout = errors.New("redisq: the queue's keys hold another layout")

package redisq

import "errors"

// ErrNotDurable is returned when fewer than Options.Replicas replicas
// acknowledged a change within Options.WaitTimeout. The change was made
// and may survive; it is not known to be on the replicas.
var ErrNotDurable = errors.New("redisq: not acknowledged by enough replicas")

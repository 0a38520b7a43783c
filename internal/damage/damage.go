// Package damage tells damage to what a queue stored from other errors,
// for the commands' exit status (internal/cli) and the dashboard's
// counts_corrupt and oldest_corrupt (package dashboard), which must agree.
//
// Is is a pure function, safe for concurrent use.
package damage

import (
	"errors"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// Is reports whether err is damage to what the queue stored (it wraps
// queue.ErrCorrupt or wal.ErrCorrupt), not another error, such as a read
// that failed on a failing disk.
func Is(err error) bool {
	return errors.Is(err, queue.ErrCorrupt) || errors.Is(err, wal.ErrCorrupt)
}

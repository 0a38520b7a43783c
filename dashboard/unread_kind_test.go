package dashboard_test

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/unreadable"
	"github.com/walq/walq/queue"
)

// diskErrStats is an ack queue whose figures carry a read error that is
// no damage: the disk failed the reads Stats made.
type diskErrStats struct{ queue.AckQueue }

func (diskErrStats) Stats() queue.Stats {
	eio := fmt.Errorf("queue: stats: read segment 3: %w", syscall.EIO)
	return queue.Stats{Ready: 5, OldestErr: eio, CountsErr: eio}
}

// api/stats said that the oldest record, or the log behind the counts,
// could not be read, but not whether it was damaged or the read failed
// otherwise, which a client needs to tell a corrupt queue (walq stats
// exits 2) from a failing disk (1). oldest_corrupt and counts_corrupt now
// say so, and are left out of a read error that is no damage.
func TestStatsSayWhetherUnreadIsDamage(t *testing.T) {
	cases := []struct {
		name                         string
		src                          dashboard.Source
		oldestCorrupt, countsCorrupt any // nil: left out
		oldestErrSet, countsErrSet   bool
	}{
		{"oldest damaged", dashboard.ForQueue(unreadable.OldestDamaged(t)), true, nil, true, false},
		{"log unread", dashboard.ForQueue(unreadable.Queue(t)), nil, true, false, true},
		{"disk error", dashboard.ForAckQueue(diskErrStats{}), nil, nil, true, true},
		{"healthy", dashboard.ForQueue(openQueue(t)), nil, nil, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stats := apiStats(t, c.src)
			assert.Equal(t, c.oldestErrSet, stats["oldest_error"] != nil, "oldest_error %v", stats["oldest_error"])
			assert.Equal(t, c.countsErrSet, stats["counts_error"] != nil, "counts_error %v", stats["counts_error"])
			assert.Equal(t, c.oldestCorrupt, stats["oldest_corrupt"])
			assert.Equal(t, c.countsCorrupt, stats["counts_corrupt"])
		})
	}
}

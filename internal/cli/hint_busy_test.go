package cli

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestHintOvertakenRead: a reading command that gave up because the
// running queue's compactions overtook every read is told to run again,
// not to read the files anyway (what it just did); a writing command is
// still told to stop the owner first.
func TestHintOvertakenRead(t *testing.T) {
	err := fmt.Errorf("queue: d: the running queue compacted its log under 101 reads in a row (%w); try again", queue.ErrLocked)
	for _, cmd := range []string{"stats", "dump", "dlq list", "dlq show"} {
		h := hint(err, cmd, "d", false)
		require.Contains(t, h, "run 'walq "+cmd+"' again", cmd)
		require.NotContains(t, h, "stop that process", cmd)
	}
	require.Contains(t, hint(err, "enqueue", "d", false), "stop that process first")
	require.Equal(t, exitLocked, exitCode(err))
}

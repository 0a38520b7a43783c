package dashboard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/unreadable"
	"github.com/walq/walq/queue"
)

// The counts of a poisoned log that could not be read back are the
// calls', not the log's: api/stats says so in counts_error, next to the
// counts, and leaves it out of a healthy queue's answer.
func TestStatsSayCountsUnread(t *testing.T) {
	q := unreadable.Queue(t)
	want := q.Stats().CountsErr
	require.ErrorIs(t, want, queue.ErrCorrupt)
	for name, src := range map[string]dashboard.Source{"ForQueue": dashboard.ForQueue(q),
		"ForAckQueue": dashboard.ForAckQueue(q)} {
		t.Run(name, func(t *testing.T) {
			stats := apiStats(t, src)
			assert.Equal(t, want.Error(), stats["counts_error"])
			assert.EqualValues(t, unreadable.Ready, stats["ready"], "the calls' counts, shown as such")
		})
	}

	assert.NotContains(t, apiStats(t, dashboard.ForQueue(openQueue(t))), "counts_error")
}

// The age of the oldest message leaves out a never-delivered message whose
// record cannot be read: api/stats says so in oldest_error, next to the
// age, and leaves it out of a healthy queue's answer.
func TestStatsSayOldestUnread(t *testing.T) {
	q := unreadable.OldestDamaged(t)
	want := q.Stats().OldestErr
	require.ErrorIs(t, want, queue.ErrCorrupt)
	for name, src := range map[string]dashboard.Source{"ForQueue": dashboard.ForQueue(q),
		"ForAckQueue": dashboard.ForAckQueue(q)} {
		t.Run(name, func(t *testing.T) {
			stats := apiStats(t, src)
			assert.Equal(t, want.Error(), stats["oldest_error"])
			assert.EqualValues(t, unreadable.OldestReady, stats["ready"])
			assert.EqualValues(t, 0, stats["oldest_age_seconds"], "the damaged message left out, and no other")
			assert.NotContains(t, stats, "counts_error")
		})
	}

	assert.NotContains(t, apiStats(t, dashboard.ForQueue(openQueue(t))), "oldest_error")
}

// apiStats serves src and returns the stats of its api/stats answer.
func apiStats(t *testing.T, src dashboard.Source) map[string]any {
	t.Helper()
	s := server(t, src, nil)
	var reply struct {
		Stats map[string]any `json:"stats"`
	}
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/stats", &reply))
	return reply.Stats
}

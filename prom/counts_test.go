package prom_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/unreadable"
	"github.com/walq/walq/prom"
	"github.com/walq/walq/queue"
)

// The counts of a poisoned log that could not be read back are the
// calls', not the log's (queue.Stats.CountsErr). walq_counts_unread is 1
// then, for an alert or a dashboard to mark the other gauges, and 0 on a
// healthy queue.
func TestCollectorSaysCountsUnread(t *testing.T) {
	const help = "# HELP walq_counts_unread 1 when the log is poisoned and could not be read back: the counts and totals are then the calls', failed ones included, not the log's (Stats.CountsErr).\n# TYPE walq_counts_unread gauge\n"
	q, err := queue.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer q.Close()
	for name, tc := range map[string]struct {
		src  prom.Source
		want string
	}{
		"healthy":    {q, "0"},
		"unreadable": {unreadable.Queue(t), "1"},
	} {
		t.Run(name, func(t *testing.T) {
			c := prom.NewCollector(tc.src, prometheus.Labels{"queue": "orders"})
			want := help + `walq_counts_unread{queue="orders"} ` + tc.want + "\n"
			require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "walq_counts_unread"))
			problems, err := testutil.CollectAndLint(c)
			require.NoError(t, err)
			require.Empty(t, problems)
		})
	}
}

// The enqueue record of the oldest never-delivered message that cannot be
// read is left out of walq_oldest_message_age_seconds
// (queue.Stats.OldestErr): walq_oldest_message_unread is 1 then, so that
// a backlog alert on the age does not read 0 as no backlog, and 0 on a
// healthy queue.
func TestCollectorSaysOldestUnread(t *testing.T) {
	const help = "# HELP walq_oldest_message_unread 1 when the record of the oldest never-delivered message could not be read: walq_oldest_message_age_seconds then leaves that message out (Stats.OldestErr).\n# TYPE walq_oldest_message_unread gauge\n"
	healthy, err := queue.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer healthy.Close()
	_, err = healthy.Enqueue(context.Background(), []byte("sound"))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		src  prom.Source
		want string
	}{
		"healthy": {healthy, "0"},
		"damaged": {unreadable.OldestDamaged(t), "1"},
	} {
		t.Run(name, func(t *testing.T) {
			c := prom.NewCollector(tc.src, prometheus.Labels{"queue": "orders"})
			want := help + `walq_oldest_message_unread{queue="orders"} ` + tc.want + "\n"
			require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "walq_oldest_message_unread"))
			problems, err := testutil.CollectAndLint(c)
			require.NoError(t, err)
			require.Empty(t, problems)
		})
	}
}

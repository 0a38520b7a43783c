package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// stats exited 0 when the record of the oldest never-delivered message
// could not be read, so a script or a probe took a damaged queue for a
// healthy one. It now exits 2 for damage and 1 for another read error.
func TestOldestUnreadExit(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"read", nil, exitOK},
		{"queue damage", fmt.Errorf("%w: stats: record at LSN 4", queue.ErrCorrupt), exitCorrupt},
		{"log damage", fmt.Errorf("queue: stats: %w", wal.ErrCorrupt), exitCorrupt},
		{"disk error", fmt.Errorf("queue: stats: read segment: %w", syscall.EIO), exitFailure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, exitCode(statsUnread(queue.Stats{OldestErr: c.err}, false)))
		})
	}
}

// remoteStatsRun serves the api/stats replies in turn (the last one
// again once they run out) and runs walq stats with args and --url.
func remoteStatsRun(t *testing.T, replies []dashboard.Stats, args ...string) (code int, stdout, stderr string, served int) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/queue/api/stats", r.URL.Path)
		i := min(int(n.Add(1))-1, len(replies)-1)
		_ = json.NewEncoder(w).Encode(remoteStats{Title: "jobs", Stats: replies[i]})
	}))
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	code = run(e, append(append([]string{"stats"}, args...), "--url", srv.URL+"/queue"))
	return code, out.String(), errOut.String(), int(n.Load())
}

// stats --url exited 0 whatever the dashboard said the service could not
// read. It now exits 2 when the oldest record or the counts' log is
// damaged (oldest_corrupt, counts_corrupt), 1 for another read error or a
// dashboard that does not say, and still prints the figures.
func TestRemoteStatsUnreadExit(t *testing.T) {
	cases := []struct {
		name string
		s    dashboard.Stats
		want int
	}{
		{"healthy", dashboard.Stats{Kind: "queue", Ready: 3}, exitOK},
		{"oldest damaged", dashboard.Stats{Kind: "queue", Ready: 3, OldestError: "queue: corrupt: bad record", OldestCorrupt: true}, exitCorrupt},
		{"oldest read error", dashboard.Stats{Kind: "queue", Ready: 3, OldestError: "read: input/output error"}, exitFailure},
		{"counts damaged", dashboard.Stats{Kind: "queue", Ready: 3, CountsError: "queue: corrupt: bad log", CountsCorrupt: true}, exitCorrupt},
		{"counts read error", dashboard.Stats{Kind: "queue", Ready: 3, CountsError: "read: input/output error"}, exitFailure},
		{"counts read error, oldest damaged", dashboard.Stats{Kind: "queue", Ready: 3, CountsError: "read: input/output error",
			OldestError: "queue: corrupt: bad record", OldestCorrupt: true}, exitCorrupt},
	}
	for _, c := range cases {
		for _, form := range [][]string{nil, {"--json"}} {
			t.Run(c.name+strings.Join(form, ""), func(t *testing.T) {
				code, stdout, stderr, _ := remoteStatsRun(t, []dashboard.Stats{c.s}, form...)
				assert.Equal(t, c.want, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				if form == nil {
					assert.Contains(t, stdout, "  ready       3\n", "the figures are printed")
				} else {
					assert.Contains(t, stdout, `"ready": 3`, "the figures are printed")
				}
				for _, why := range []string{c.s.OldestError, c.s.CountsError} {
					if why != "" {
						assert.Contains(t, stderr, why)
					}
				}
			})
		}
	}
}

// stats --watch goes on refreshing through figures that say a record
// could not be read, and exits with the status of its last refresh.
func TestRemoteStatsWatchUnread(t *testing.T) {
	damaged := dashboard.Stats{Kind: "queue", Ready: 3, OldestError: "queue: corrupt: bad record", OldestCorrupt: true}
	healthy := dashboard.Stats{Kind: "queue", Ready: 2}
	cases := []struct {
		name    string
		replies []dashboard.Stats
		want    int
	}{
		{"damaged throughout", []dashboard.Stats{damaged}, exitCorrupt},
		{"damaged, then dead-lettered", []dashboard.Stats{damaged, damaged, healthy}, exitOK},
		{"healthy, then damaged", []dashboard.Stats{healthy, healthy, damaged}, exitCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr, served := remoteStatsRun(t, c.replies, "--watch", "--interval", "1ms", "--times", "3")
			assert.Equal(t, c.want, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Equal(t, 3, served, "every refresh is made")
		})
	}
}

// TestStatsOldestUnreadNamesWhatByKind: an unread oldest record was
// called "the oldest never-delivered message" on a sorted queue too,
// whose age is taken from its oldest pending or leased value, leased
// ones included.
func TestStatsOldestUnreadNamesWhatByKind(t *testing.T) {
	why := fmt.Errorf("%w: stats: record at LSN 4", queue.ErrCorrupt)
	for _, c := range []struct {
		sorted    bool
		want, not string
	}{
		{false, "the oldest never-delivered message", "pending or leased"},
		{true, "the oldest pending or leased value", "never-delivered"},
	} {
		err := statsUnread(queue.Stats{OldestErr: why}, c.sorted)
		require.ErrorContains(t, err, "the record of "+c.want+" could not be read")
		require.NotContains(t, err.Error(), c.not)
		r := &statsReport{countsJSON: countsJSON{OldestError: why.Error()}}
		if c.sorted {
			r.Sorted = &sortedJSON{Pending: 1}
		}
		require.Contains(t, oldestText(r), "the record of "+c.want+" could not be read, and is left out")
	}
}

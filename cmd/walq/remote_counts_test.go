package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/unreadable"
)

// TestRemoteStatsSayCountsUnread: the counts of a running service whose
// log is poisoned and could not be read back are the calls', not the
// log's. stats --url printed them as any others; it now says so, and
// why, under them, and --json carries counts_error. It exited 0 all the
// same; the log is damaged, so it now exits 2, after the figures, and
// --json carries counts_corrupt.
func TestRemoteStatsSayCountsUnread(t *testing.T) {
	q := unreadable.Queue(t)
	why := q.Stats().CountsErr
	require.Error(t, why)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForQueue(q), nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	r := mustWalq(t, 2, "", "stats", "--url", srv.URL+"/queue")
	assert.Contains(t, r.stdout, "ready       1201\n")
	assert.Contains(t, r.stdout, "counts not checked: the log could not be read back after a failed write; "+
		"the counts are those of the calls, failed ones included, not what the log holds: "+why.Error()+"\n")
	r = mustWalq(t, 2, "", "stats", "--json", "--url", srv.URL+"/queue")
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, why.Error(), s["counts_error"])
	assert.Equal(t, true, s["counts_corrupt"])
}

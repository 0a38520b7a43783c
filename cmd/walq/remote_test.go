package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// runningService serves the dashboard of an open queue under /queue/,
// behind a bearer token, as a service would; the queue holds its
// directory's lock all along.
func runningService(t *testing.T) (*queue.Queue, string) {
	t.Helper()
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", auth(dashboard.New(dashboard.ForQueue(q), nil))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return q, srv.URL + "/queue"
}

func TestStatsAndDLQFromARunningService(t *testing.T) {
	q, url := runningService(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := q.Enqueue(ctx, []byte("job"))
		require.NoError(t, err)
	}
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad input"))
	before := q.Stats().LastLSN
	tok := "Authorization: Bearer s3cret"

	r := mustWalq(t, 0, "", "stats", "--url", url, "-H", tok)
	for _, want := range []string{"ready       2", "in flight   0", "dead        1", "dead-lettered 1", "enqueued 3"} {
		assert.Contains(t, r.stdout, want)
	}
	r = mustWalq(t, 0, "", "stats", "--json", "--url", url+"/", "-H", tok)
	var s dashboard.Stats
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, int64(2), s.Ready)
	assert.Equal(t, uint64(3), s.Enqueued)

	r = mustWalq(t, 0, "", "stats", "--watch", "--times", "3", "--interval", "10ms", "--url", url, "-H", tok)
	assert.Equal(t, 3, strings.Count(r.stdout, "ready       2"), "three refreshes:\n%s", r.stdout)

	r = mustWalq(t, 0, "", "dlq", "list", "--url", url, "-H", tok)
	assert.Contains(t, r.stdout, m.ID)
	assert.Contains(t, r.stdout, "bad input")
	r = mustWalq(t, 0, "", "dlq", "list", "--json", "--url", url, "-H", tok)
	var d dashboard.Message
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
	assert.Equal(t, m.ID, d.ID)
	assert.Equal(t, before, q.Stats().LastLSN, "reading from outside writes nothing")
}

func TestRemoteErrors(t *testing.T) {
	_, url := runningService(t)
	r := mustWalq(t, 1, "", "stats", "--url", url)
	assert.Contains(t, r.stderr, "401")
	r = mustWalq(t, 1, "", "stats", "--url", "ftp://x")
	assert.Contains(t, r.stderr, "not an http(s) URL")
	r = mustWalq(t, 1, "", "stats", "--url", url, "somedir")
	assert.Contains(t, r.stderr, "--url takes no DIR")
	r = mustWalq(t, 1, "", "stats")
	assert.Contains(t, r.stderr, "missing DIR")
	r = mustWalq(t, 5, "", "dlq", "list", "--url", url+"/nothing-here", "-H", "Authorization: Bearer s3cret")
	assert.Contains(t, r.stderr, "404")
}

// TestRemoteDLQListSeqColumn: the SEQ column of a remote dead list holds
// the seq alone, for an id that travels in hex (SEQ~HEX) as for a plain
// one (SEQ@ID).
func TestRemoteDLQListSeqColumn(t *testing.T) {
	q, url := runningService(t)
	ctx := context.Background()
	ids := []string{"\xffodd", "plain"}
	for _, id := range ids {
		_, err := q.Enqueue(ctx, []byte("job"), queue.WithID(id))
		require.NoError(t, err)
	}
	for range ids {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.DeadLetter("bad input"))
	}
	r := mustWalq(t, 0, "", "dlq", "list", "--url", url, "-H", "Authorization: Bearer s3cret")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1+len(ids), r.stdout)
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 2, line)
		assert.Equal(t, strconv.Itoa(i+1), f[1], "the SEQ column of the dead letter %q:\n%s", ids[i], r.stdout)
	}
}

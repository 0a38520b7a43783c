package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/unreadable"
	"github.com/walq/walq/queue"
)

// unreadOldest is what stats prints after the oldest message's age when
// the record of the oldest never-delivered message cannot be read.
const unreadOldest = "; the record of the oldest never-delivered message could not be read, and is left out: "

// TestStatsSayOldestUnread: the age of the oldest message leaves out a
// never-delivered message whose record cannot be read (Stats.OldestErr).
// stats printed "none" for such a queue, as for an empty one; it now says
// so, and why, of a directory and with --url, and --json carries
// oldest_error. It exited 0 all the same; the record is damaged, so it
// now exits 2, after the figures, and --json carries oldest_corrupt.
func TestStatsSayOldestUnread(t *testing.T) {
	t.Run("dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "q")
		q, err := queue.Open(dir, fixtureOptions())
		require.NoError(t, err)
		pad := strings.Repeat("p", 600)
		for _, p := range []string{"DAMAGED", "f0", "f1", "f2", "f3", "f4", "f5", "f6"} {
			_, err := q.Enqueue(context.Background(), []byte(p+"|"+pad))
			require.NoError(t, err)
		}
		require.NoError(t, q.Close())
		require.Greater(t, len(segments(t, dir)), 1, "the damaged record's segment is sealed")
		seg := segments(t, dir)[0]
		b, err := os.ReadFile(seg)
		require.NoError(t, err)
		i := bytes.Index(b, []byte("DAMAGED"))
		require.GreaterOrEqual(t, i, 0)
		b[i] ^= 0x20 // a bad sector, sealed and below the snapshot: the open does not read it
		require.NoError(t, os.WriteFile(seg, b, 0o600))

		r := mustWalq(t, 2, "", "stats", dir)
		assert.Contains(t, r.stdout, "  oldest      none"+unreadOldest+"queue: corrupt: ")
		assert.Contains(t, r.stdout, "lifetime\n", "the figures are printed in full")
		assert.Contains(t, r.stderr, "hint: run 'walq verify "+dir)
		r = mustWalq(t, 2, "", "stats", "--json", dir)
		var s map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
		assert.Contains(t, s["oldest_error"], "queue: corrupt: ")
	})
	t.Run("url", func(t *testing.T) {
		q := unreadable.OldestDamaged(t)
		why := q.Stats().OldestErr
		require.Error(t, why)
		mux := http.NewServeMux()
		mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForQueue(q), nil)))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)

		r := mustWalq(t, 2, "", "stats", "--url", srv.URL+"/queue")
		assert.Contains(t, r.stdout, "  oldest      none"+unreadOldest+why.Error()+"\n")
		r = mustWalq(t, 2, "", "stats", "--json", "--url", srv.URL+"/queue")
		var s map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
		assert.Equal(t, why.Error(), s["oldest_error"])
		assert.Equal(t, true, s["oldest_corrupt"])
	})
}

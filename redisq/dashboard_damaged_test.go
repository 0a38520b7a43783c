package redisq_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// A dead value whose stored record cannot be read has no publish time to
// be named by. Its Ref was SEQ@ and the zero time's nanoseconds, which
// the engine refuses as corrupt, so the page's purge of it failed (500)
// where walq-redis dlq purge SEQ removes it. Its Ref is now its seq
// alone, which the actions take for a dead value whose time cannot be
// read, and only for one: a bare seq still names no other value.
func TestDashboardDamagedDeadValue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "dmg", &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("damaged")))
	require.NoError(t, s.Publish(ctx, 2, "b", []byte("healthy")))
	bs, err := s.TryPull(2)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("bad"))
	}
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	damaged, healthy := strconv.FormatUint(ds[0].Seq, 10), strconv.FormatUint(ds[1].Seq, 10)
	require.NoError(t, srv.Client().HSet(ctx, "walq:{dmg}:s:val", damaged, "garbage").Err())

	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForSortedQueue[int64](s), &dashboard.Options{Actions: true})))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	var p dashboard.Page
	getJSON(t, hs.URL+"/queue/api/messages?state=dead", &p)
	require.Len(t, p.Messages, 2)
	require.Equal(t, damaged, p.Messages[0].Ref, "named by its seq alone: its publish time cannot be read")
	require.Equal(t, healthy+"@"+strconv.FormatInt(ds[1].PublishedAt.UnixNano(), 10), p.Messages[1].Ref)

	act := func(action, ref string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/queue/api/dead/"+action, strings.NewReader(`{"ref":"`+ref+`"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusBadRequest, act("purge", healthy), "a bare seq names no value whose time reads")
	require.Equal(t, http.StatusOK, act("purge", damaged))
	st := s.Stats()
	require.Equal(t, 1, st.SortedDead, "the damaged value is purged, the other kept")
	require.Equal(t, http.StatusNotFound, act("purge", damaged), "gone")
}

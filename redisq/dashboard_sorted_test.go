package redisq_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// A Redis sorted or windowed queue shows in the dashboard through the
// shared method set (dashboard.ForSortedQueue): its figures and dead
// values, and a dead value requeued from the page's API is pulled again.
// It lists no keys, which the shared method set cannot read. The age of
// the oldest pending value shows, as of an embedded sorted queue.
func TestDashboardSorted(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "srt", &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	w, err := redisq.OpenWindowed(ctx, srv.Client(), "win", &redisq.WindowOptions{Window: time.Nanosecond})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, s.Publish(ctx, 7, "a", []byte("broken")))
	require.NoError(t, s.Publish(ctx, 8, "b", []byte("next")))
	require.NoError(t, w.Publish(ctx, "k", []byte("late")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("bad input"))

	srcs := map[string]dashboard.Source{"sorted": dashboard.ForSortedQueue[int64](s), "windowed": dashboard.ForSortedQueue(w.Sorted)}
	mux := http.NewServeMux()
	for name, src := range srcs {
		mux.Handle("/"+name+"/", http.StripPrefix("/"+name, dashboard.New(src, &dashboard.Options{Actions: true})))
	}
	hs := httptest.NewServer(mux)
	defer hs.Close()

	var st struct {
		Actions bool            `json:"actions"`
		Keys    bool            `json:"keys"`
		Stats   dashboard.Stats `json:"stats"`
	}
	getJSON(t, hs.URL+"/sorted/api/stats", &st)
	require.True(t, st.Actions)
	require.False(t, st.Keys, "no key list through the shared method set")
	require.Equal(t, "sorted", st.Stats.Kind)
	require.Equal(t, [4]int64{0, 1, 1, 1}, [4]int64{st.Stats.InFlight, st.Stats.Ready, st.Stats.Dead, st.Stats.Keys})
	require.Positive(t, st.Stats.OldestAgeSeconds, "the age of the oldest pending value")
	getJSON(t, hs.URL+"/windowed/api/stats", &st)
	require.Equal(t, int64(1), st.Stats.Ready)
	require.Positive(t, st.Stats.OldestAgeSeconds, "the age of the oldest pending value")

	var p dashboard.Page
	getJSON(t, hs.URL+"/sorted/api/messages?state=dead", &p)
	require.Len(t, p.Messages, 1)
	d := p.Messages[0]
	require.Equal(t, "a/1", d.ID)
	require.Equal(t, "bad input", d.Reason)
	require.Equal(t, map[string]string{"key": "a", "sort": "7"}, d.Headers)
	var m struct {
		PayloadText string `json:"payload_text"`
	}
	getJSON(t, hs.URL+"/sorted/api/message?ref="+d.Ref, &m)
	require.Equal(t, "broken", m.PayloadText)

	req, err := http.NewRequest(http.MethodPost, hs.URL+"/sorted/api/dead/requeue", strings.NewReader(`{"ref":"`+d.Ref+`"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	bs, err = s.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "broken", string(bs[0].Values[0].Payload), "the requeued value is pulled first again, by its sort key")
}

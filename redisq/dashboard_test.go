package redisq_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// A Redis queue shows in the dashboard through the shared method set: its
// figures and dead letters, and a dead letter requeued from the page's API
// is delivered again.
func TestDashboard(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "dashboard", &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("broken"), queue.WithID("job-1"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad input"))

	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForAckQueue(q), &dashboard.Options{Actions: true})))
	s := httptest.NewServer(mux)
	defer s.Close()
	var st struct {
		Stats dashboard.Stats `json:"stats"`
	}
	getJSON(t, s.URL+"/queue/api/stats", &st)
	require.Equal(t, int64(1), st.Stats.Dead)
	var p dashboard.Page
	getJSON(t, s.URL+"/queue/api/messages?state=dead", &p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, "job-1", p.Messages[0].ID)

	req, err := http.NewRequest(http.MethodPost, s.URL+"/queue/api/dead/requeue",
		strings.NewReader(`{"ref":"`+p.Messages[0].Ref+`"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", s.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "broken", string(m.Payload), "a requeued dead letter is delivered again")
	require.NoError(t, m.Ack())
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NoError(t, json.NewDecoder(res.Body).Decode(v))
}

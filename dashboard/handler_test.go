package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// server mounts the dashboard of q under /queue/ as a service would.
func server(t *testing.T, src dashboard.Source, opts *dashboard.Options) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(src, opts)))
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.NoError(t, json.NewDecoder(res.Body).Decode(v))
	return res.StatusCode
}

func openQueue(t *testing.T) *queue.Queue {
	t.Helper()
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	return q
}

// deadLetter enqueues a message and dead-letters it; it returns its id.
func deadLetter(t *testing.T, q *queue.Queue, payload string) string {
	t.Helper()
	id, err := q.Enqueue(context.Background(), []byte(payload), queue.WithHeaders(map[string]string{"kind": "test"}))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("broken"))
	return id
}

func TestStatsAndMessagesMatchTheQueue(t *testing.T) {
	q := openQueue(t)
	ctx := context.Background()
	dead := deadLetter(t, q, "dead one")
	for i := 0; i < 5; i++ {
		_, err := q.Enqueue(ctx, []byte("m"))
		require.NoError(t, err)
	}
	_, err := q.TryDequeue()
	require.NoError(t, err)
	s := server(t, dashboard.ForQueue(q), nil)

	var st struct {
		Actions bool            `json:"actions"`
		Stats   dashboard.Stats `json:"stats"`
		History []dashboard.Sample
	}
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/stats", &st))
	assert.Equal(t, int64(4), st.Stats.Ready)
	assert.Equal(t, int64(1), st.Stats.InFlight)
	assert.Equal(t, int64(1), st.Stats.Dead)
	assert.Equal(t, uint64(6), st.Stats.Enqueued)
	assert.False(t, st.Actions, "read-only by default")
	assert.Len(t, st.History, 1)

	var p dashboard.Page
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/messages?state=ready&limit=3", &p))
	require.Len(t, p.Messages, 3)
	require.NotEmpty(t, p.Next)
	var p2 dashboard.Page
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/messages?state=ready&limit=3&after="+p.Next, &p2))
	require.Len(t, p2.Messages, 1)
	assert.Empty(t, p2.Next)

	var d dashboard.Page
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/messages?state=dead", &d))
	require.Len(t, d.Messages, 1)
	assert.Equal(t, dead, d.Messages[0].ID)
	assert.Equal(t, "broken", d.Messages[0].Reason)

	var m map[string]any
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+d.Messages[0].Ref, &m))
	assert.Equal(t, "dead one", m["payload_text"])
	assert.Equal(t, map[string]any{"kind": "test"}, m["headers"])

	var e map[string]string
	assert.Equal(t, 400, getJSON(t, s.URL+"/queue/api/messages?state=leased", &e))
	assert.Equal(t, 404, getJSON(t, s.URL+"/queue/api/message?ref=999999", &e))
	assert.Equal(t, 400, getJSON(t, s.URL+"/queue/api/message?ref=x", &e))
	assert.Equal(t, 404, getJSON(t, s.URL+"/queue/api/keys", &e), "an ack queue has no keys")
}

func TestPayloadPreview(t *testing.T) {
	q := openQueue(t)
	ctx := context.Background()
	_, err := q.Enqueue(ctx, []byte{0xff, 0x00, 0x01})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte(strings.Repeat("é", 10)))
	require.NoError(t, err)
	s := server(t, dashboard.ForQueue(q), &dashboard.Options{PreviewBytes: 5})
	var p dashboard.Page
	getJSON(t, s.URL+"/queue/api/messages", &p)
	require.Len(t, p.Messages, 2)
	var bin, text map[string]any
	getJSON(t, s.URL+"/queue/api/message?ref="+p.Messages[0].Ref, &bin)
	assert.Equal(t, "/wAB", bin["payload_base64"])
	assert.Equal(t, false, bin["truncated"])
	getJSON(t, s.URL+"/queue/api/message?ref="+p.Messages[1].Ref, &text)
	assert.Equal(t, "éé", text["payload_text"], "a rune cut in two is dropped")
	assert.Equal(t, 20.0, text["payload_bytes"])
	assert.Equal(t, true, text["truncated"])
}

// TestPayloadEncodingOfTheWholePayload: a preview tells only how its own
// bytes are printed; payload_encoding says how walq's --json prints the
// whole payload, which may be binary past the preview.
func TestPayloadEncodingOfTheWholePayload(t *testing.T) {
	q := openQueue(t)
	ctx := context.Background()
	for _, p := range []string{"abcdefgh\xff", "abcdefgh\x00", "abcdefghé", "\xff"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	s := server(t, dashboard.ForQueue(q), &dashboard.Options{PreviewBytes: 5})
	var p dashboard.Page
	getJSON(t, s.URL+"/queue/api/messages", &p)
	require.Len(t, p.Messages, 4)
	for i, want := range []string{"base64", "base64", "text", "base64"} {
		var m map[string]any
		getJSON(t, s.URL+"/queue/api/message?ref="+p.Messages[i].Ref, &m)
		assert.Equal(t, want, m["payload_encoding"], "message %d", i)
		if i < 3 {
			assert.Equal(t, "abcde", m["payload_text"], "message %d: the preview is text", i)
		}
	}
}

// post sends an action as the page does, with extra headers.
func post(t *testing.T, url, body string, h map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestActionsOnlyWhenEnabledSameOriginAndJSON(t *testing.T) {
	q := openQueue(t)
	deadLetter(t, q, "again")
	ro := server(t, dashboard.ForQueue(q), nil)
	rw := server(t, dashboard.ForQueue(q), &dashboard.Options{Actions: true})
	var d dashboard.Page
	getJSON(t, rw.URL+"/queue/api/messages?state=dead", &d)
	require.Len(t, d.Messages, 1)
	body := `{"ref":"` + d.Messages[0].Ref + `"}`
	seq, _, _ := strings.Cut(d.Messages[0].Ref, "@")
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": rw.URL}

	cases := []struct {
		name string
		url  string
		body string
		h    map[string]string
		code int
	}{
		{"read-only handler", ro.URL + "/queue/api/dead/requeue", body, same, 403},
		{"another site", rw.URL + "/queue/api/dead/requeue", body, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"a sibling site", rw.URL + "/queue/api/dead/requeue", body, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": rw.URL}, 403},
		{"another origin", rw.URL + "/queue/api/dead/purge", body, map[string]string{"Origin": "https://evil.example"}, 403},
		{"a form post", rw.URL + "/queue/api/dead/purge", body, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 403},
		{"unknown message", rw.URL + "/queue/api/dead/requeue", `{"ref":"424242@x"}`, same, 404},
		{"another message's id", rw.URL + "/queue/api/dead/purge", `{"ref":"` + seq + `@x"}`, same, 404},
		{"a bare seq", rw.URL + "/queue/api/dead/purge", `{"ref":"` + seq + `"}`, same, 400},
		{"no id", rw.URL + "/queue/api/dead/purge", `{"ref":"` + seq + `@"}`, same, 400},
		{"bad body", rw.URL + "/queue/api/dead/requeue", `{`, same, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, msg := post(t, c.url, c.body, c.h)
			assert.Equal(t, c.code, code, msg)
			assert.Equal(t, int64(1), q.Stats().Dead, "nothing changed")
		})
	}
	res, err := http.Get(rw.URL + "/queue/api/dead/requeue")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode, "no action by GET")

	// An older browser sends Origin only; a request with neither header is
	// not from a browser page.
	code, msg := post(t, rw.URL+"/queue/api/dead/requeue", body, map[string]string{"Origin": rw.URL})
	require.Equal(t, 200, code, msg)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	assert.Equal(t, "again", string(m.Payload), "a requeued dead letter is delivered again")
	require.NoError(t, m.DeadLetter("still broken"))
	code, msg = post(t, rw.URL+"/queue/api/dead/purge", body, same)
	require.Equal(t, 200, code, msg)
	assert.Equal(t, int64(0), q.Stats().Dead)
	code, _ = post(t, rw.URL+"/queue/api/dead/purge", body, same)
	assert.Equal(t, 404, code)
}

func TestPageIsServedWithoutOutsideAssets(t *testing.T) {
	s := server(t, dashboard.ForQueue(openQueue(t)), nil)
	for _, path := range []string{"/queue/", "/queue/app.js", "/queue/style.css"} {
		res, err := http.Get(s.URL + path)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, 200, res.StatusCode, path)
		assert.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
		local := strings.ReplaceAll(string(b), `"http://www.w3.org/2000/svg"`, "") // a name, not a fetch
		assert.NotContains(t, local, "http://", path)
		assert.NotContains(t, local, "https://", path)
		assert.NotContains(t, local, "//cdn", path)
	}
}

func TestSortedQueueShowsKeys(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	for i, key := range []string{"b", "a", "b", "c"} {
		require.NoError(t, sq.Publish(ctx, 10-i, key, []byte("v")))
	}
	s := server(t, dashboard.ForSorted(sq), nil)
	var st struct {
		Keys  bool            `json:"keys"`
		Stats dashboard.Stats `json:"stats"`
	}
	getJSON(t, s.URL+"/queue/api/stats", &st)
	assert.True(t, st.Keys)
	assert.Equal(t, "sorted", st.Stats.Kind)
	assert.Equal(t, int64(4), st.Stats.Ready)
	assert.Equal(t, uint64(4), st.Stats.Enqueued)
	var kp dashboard.KeyPage
	getJSON(t, s.URL+"/queue/api/keys?limit=2", &kp)
	require.Len(t, kp.Keys, 2)
	assert.Equal(t, "a", kp.Keys[0].Key)
	assert.Equal(t, "b", kp.Keys[1].Key)
	assert.Equal(t, 2, kp.Keys[1].Values)
	assert.Equal(t, "8", kp.Keys[1].First)
	assert.Equal(t, "b", kp.Next)
	getJSON(t, s.URL+"/queue/api/keys?after="+kp.Next, &kp)
	require.Len(t, kp.Keys, 1)
	assert.Equal(t, "c", kp.Keys[0].Key)
}

func TestSortedQueueDeadValues(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), &queue.SortedOptions{Options: queue.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	require.NoError(t, sq.Publish(ctx, 1, "acme", []byte("broken")))
	require.NoError(t, sq.Publish(ctx, 2, "zeta", []byte("fine")))
	bs, err := sq.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].DeadLetter("bad input"))
	s := server(t, dashboard.ForSorted(sq), &dashboard.Options{Actions: true})

	var p dashboard.Page
	getJSON(t, s.URL+"/queue/api/messages?state=dead", &p)
	require.Len(t, p.Messages, 1)
	dead := p.Messages[0]
	assert.Equal(t, "bad input", dead.Reason)
	assert.Equal(t, "acme", dead.Headers["key"])
	assert.Equal(t, "1", dead.Headers["sort"])
	getJSON(t, s.URL+"/queue/api/messages?state=ready", &p)
	assert.Empty(t, p.Messages, "pending values are listed by key")
	var one struct {
		dashboard.Message
		PayloadText string `json:"payload_text"`
	}
	assert.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+dead.Ref, &one))
	assert.Equal(t, dead.Ref, one.Ref)
	assert.Equal(t, "broken", one.PayloadText)

	same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	code, msg := post(t, s.URL+"/queue/api/dead/requeue", `{"ref":"`+dead.Ref+`"}`, same)
	require.Equal(t, 200, code, msg)
	bs, err = sq.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2, "the requeued value is pending again")
	require.Equal(t, "acme", bs[0].Key)
	require.NoError(t, bs[0].DeadLetter("still broken"))
	require.NoError(t, bs[1].Ack())
	getJSON(t, s.URL+"/queue/api/messages?state=dead", &p)
	require.Len(t, p.Messages, 1)
	code, msg = post(t, s.URL+"/queue/api/dead/purge", `{"ref":"`+p.Messages[0].Ref+`"}`, same)
	require.Equal(t, 200, code, msg)
	assert.Equal(t, int64(0), sq.Stats().Dead)
	code, _ = post(t, s.URL+"/queue/api/dead/purge", `{"ref":"`+p.Messages[0].Ref+`"}`, same)
	assert.Equal(t, 404, code)
}

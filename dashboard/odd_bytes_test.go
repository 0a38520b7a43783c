package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// TestMessageJSONKeepsOddBytes: JSON strings hold UTF-8 only, so an id,
// reason or header that is not valid UTF-8 is sent in base64 in
// id_base64, reason_base64 and headers_base64 (name and value both), its
// text field empty or the header left out, as the CLI's --json does;
// Exact gives a Message decoded from the API its exact bytes again.
func TestMessageJSONKeepsOddBytes(t *testing.T) {
	q := openQueue(t)
	const id, reason = "\xff\xfe/order", "bad \xfe byte"
	headers := map[string]string{"k\xff": "v\xfe", "ok": "fine"}
	_, err := q.Enqueue(context.Background(), []byte("p"), queue.WithID(id), queue.WithHeaders(headers))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter(reason))
	s := server(t, dashboard.ForQueue(q), nil)

	var p dashboard.Page
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/messages?state=dead", &p))
	require.Len(t, p.Messages, 1)
	listed, err := p.Messages[0].Exact()
	require.NoError(t, err)
	require.Equal(t, id, listed.ID)
	require.Equal(t, reason, listed.Reason)

	ref := url.QueryEscape(p.Messages[0].Ref)
	var one dashboard.Message
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+ref, &one))
	one, err = one.Exact()
	require.NoError(t, err)
	require.Equal(t, id, one.ID)
	require.Equal(t, reason, one.Reason)
	require.Equal(t, headers, one.Headers)

	res, err := http.Get(s.URL + "/queue/api/message?ref=" + ref)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(body, &raw))
	require.Equal(t, "", raw["id"])
	require.Equal(t, "//4vb3JkZXI=", raw["id_base64"])
	require.Nil(t, raw["reason"], "an empty reason is left out")
	require.Equal(t, "YmFkIP4gYnl0ZQ==", raw["reason_base64"])
	require.Equal(t, map[string]any{"ok": "fine"}, raw["headers"])
	require.Equal(t, map[string]any{"a/8=": "dv4="}, raw["headers_base64"])
	require.Equal(t, "p", raw["payload_text"], "the payload preview is still sent")
}

// TestKeysJSONKeepsOddBytes: api/keys sent a sorted queue's key that is
// not valid UTF-8 with U+FFFD in place of its bytes, with no twin. It is
// sent in key_base64, key empty, as the other fields' twins are, and
// Key.Exact gives it back.
func TestKeysJSONKeepsOddBytes(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	for _, key := range []string{"k\xfe", "ok"} {
		require.NoError(t, sq.Publish(context.Background(), 1, key, []byte("v")))
	}
	s := server(t, dashboard.ForSorted(sq), nil)

	var raw struct{ Keys []map[string]any }
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/keys", &raw))
	require.Len(t, raw.Keys, 2)
	require.Equal(t, "", raw.Keys[0]["key"])
	require.Equal(t, "a/4=", raw.Keys[0]["key_base64"])
	require.Equal(t, "ok", raw.Keys[1]["key"])
	require.NotContains(t, raw.Keys[1], "key_base64", "a UTF-8 key has no twin")

	var kp dashboard.KeyPage
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/keys", &kp))
	var got []string
	for _, k := range kp.Keys {
		k, err := k.Exact()
		require.NoError(t, err)
		got = append(got, k.Key)
	}
	require.Equal(t, []string{"k\xfe", "ok"}, got)
}

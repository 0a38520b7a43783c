package dashboard_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// TestDeadLetterWithOddIDBytes: a producer-given id may hold any bytes,
// but JSON carries only UTF-8 (a bad byte becomes U+FFFD), so a Ref that
// holds such an id verbatim reaches the browser as another id, and the
// view, the requeue and the purge of the letter it lists answer 404. The
// Ref the list gives must name the letter exactly, through ForQueue and
// ForAckQueue.
func TestDeadLetterWithOddIDBytes(t *testing.T) {
	for name, source := range map[string]func(*queue.Queue) dashboard.Source{
		"ForQueue":    dashboard.ForQueue,
		"ForAckQueue": func(q *queue.Queue) dashboard.Source { return dashboard.ForAckQueue(q) },
	} {
		t.Run(name, func(t *testing.T) {
			q := openQueue(t)
			ids := []string{"\xff\xfe/order", "plain@id", "~7", "é"}
			for _, id := range ids {
				_, err := q.Enqueue(context.Background(), []byte("p "+id), queue.WithID(id))
				require.NoError(t, err)
				deadLetterOnly(t, q, id)
			}
			s := server(t, source(q), &dashboard.Options{Actions: true})
			refs := deadRefs(t, s.URL)
			require.Len(t, refs, len(ids))
			for i, ref := range refs {
				var m dashboard.Message
				require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(ref), &m),
					"the view of %q, the listed reference of the dead letter %q", ref, ids[i])
				code, msg := post(t, s.URL+"/queue/api/dead/requeue", refBody(t, ref), nil)
				require.Equal(t, 200, code, "requeue of %q: %s", ref, msg)
				got, err := q.TryDequeue()
				require.NoError(t, err)
				require.Equal(t, ids[i], got.ID, "the requeue of %q made another message ready", ref)
				require.NoError(t, got.Ack())
			}
		})
	}
}

// TestNotFoundTextOfOddRef: a reference to a dead letter whose id is not
// UTF-8 is sent as SEQ~HEX; the 404 for one that no longer matches names
// it as sent, not with its raw bytes, which JSON replaces.
func TestNotFoundTextOfOddRef(t *testing.T) {
	q := openQueue(t)
	_, err := q.Enqueue(context.Background(), []byte("p"), queue.WithID("\xffodd"))
	require.NoError(t, err)
	deadLetterOnly(t, q, "\xffodd")
	s := server(t, dashboard.ForQueue(q), &dashboard.Options{Actions: true})
	refs := deadRefs(t, s.URL)
	require.Equal(t, []string{"1~ff6f6464"}, refs)
	var e struct{ Error string }
	require.Equal(t, 404, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape("1~ff6f7468"), &e))
	require.Contains(t, e.Error, "no message 1~ff6f7468:")
	require.Contains(t, e.Error, "the message 1 is ~ff6f6464 ")
	require.NotContains(t, e.Error, "\ufffd")
}

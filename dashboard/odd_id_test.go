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

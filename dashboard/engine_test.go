package dashboard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// ForAckQueue shows any engine through the shared method set: figures and
// the dead-letter set, with requeue and purge.
func TestAckQueueSource(t *testing.T) {
	var q queue.AckQueue = openQueue(t)
	ctx := context.Background()
	_, err := q.Enqueue(ctx, []byte("broken"), queue.WithID("job-1"))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("fine"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad input"))
	s := server(t, dashboard.ForAckQueue(q), &dashboard.Options{Actions: true})

	var st struct {
		Stats dashboard.Stats `json:"stats"`
	}
	getJSON(t, s.URL+"/queue/api/stats", &st)
	assert.Equal(t, int64(1), st.Stats.Ready)
	assert.Equal(t, int64(1), st.Stats.Dead)
	var p dashboard.Page
	getJSON(t, s.URL+"/queue/api/messages?state=dead", &p)
	require.Len(t, p.Messages, 1)
	assert.Equal(t, "job-1", p.Messages[0].ID)
	assert.Equal(t, "bad input", p.Messages[0].Reason)
	var one struct {
		dashboard.Message
		PayloadText string `json:"payload_text"`
	}
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+p.Messages[0].Ref, &one))
	assert.Equal(t, "broken", one.PayloadText)

	same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	code, msg := post(t, s.URL+"/queue/api/dead/requeue", `{"ref":"`+p.Messages[0].Ref+`"}`, same)
	require.Equal(t, 200, code, msg)
	m, err = q.TryDequeue()
	require.NoError(t, err)
	assert.Equal(t, "broken", string(m.Payload), "a requeued dead letter is delivered again")
	require.NoError(t, m.DeadLetter("still broken"))
	code, msg = post(t, s.URL+"/queue/api/dead/purge", `{"ref":"`+p.Messages[0].Ref+`"}`, same)
	require.Equal(t, 200, code, msg)
	assert.Equal(t, int64(0), q.Stats().Dead)
	code, _ = post(t, s.URL+"/queue/api/dead/purge", `{"ref":"`+p.Messages[0].Ref+`"}`, same)
	assert.Equal(t, 404, code)
}

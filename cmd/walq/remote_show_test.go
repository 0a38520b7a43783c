package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// deadLetter enqueues payload with id into q and dead-letters it; it
// returns the dead letter's seq.
func deadLetter(t *testing.T, q *queue.Queue, id, payload string) uint64 {
	t.Helper()
	_, err := q.Enqueue(context.Background(), []byte(payload), queue.WithID(id))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.NoError(t, m.DeadLetter("r"))
	return m.Receipt.Seq
}

// TestRemoteShowIDBeforeRef: dlq show --url took the first dead letter
// whose id or ref was the name given, so an id that is an older letter's
// ref showed that older letter, where the local form shows the letter
// with that id. A ref is taken only when no id matches.
func TestRemoteShowIDBeforeRef(t *testing.T) {
	q, url := runningService(t)
	seq := deadLetter(t, q, "b", "first")
	other := fmt.Sprintf("%d@b", seq) // the ref of the first letter
	seq2 := deadLetter(t, q, other, "second")
	tok := "Authorization: Bearer s3cret"
	remote := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, other).stdout
	byRef := walq(t, "", "dlq", "show", "--url", url, "-H", tok, fmt.Sprintf("%d@%s", seq2, other)).stdout
	require.NoError(t, q.Close())
	local := mustWalq(t, 0, "", "dlq", "show", q.Dir(), other).stdout
	assert.Contains(t, local, "second")
	assert.Equal(t, local, remote)
	assert.Equal(t, local, byRef, "a ref that no id matches names its letter")
}

// TestRemoteShowPastTheFirstPage: a letter beyond the dashboard's first
// page of the list (500) is found, as the local form finds it.
func TestRemoteShowPastTheFirstPage(t *testing.T) {
	q, url := runningService(t)
	for i := 0; i < 620; i++ {
		deadLetter(t, q, fmt.Sprintf("n-%d", i), fmt.Sprintf("p-%d", i))
	}
	tok := "Authorization: Bearer s3cret"
	far := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, "n-610").stdout
	require.NoError(t, q.Close())
	assert.Equal(t, mustWalq(t, 0, "", "dlq", "show", q.Dir(), "n-610").stdout, far)
}

// TestRemoteShowEncodingPastPreview: dlq show --url judged the payload's
// encoding from the dashboard's preview (its first 4096 bytes) alone, so
// a payload that is binary past it was said to be text, where the local
// form says base64. The encoding is the whole payload's.
func TestRemoteShowEncodingPastPreview(t *testing.T) {
	for _, tc := range []struct{ name, payload, want string }{
		{"binary past the preview", strings.Repeat("a", 4200) + "\xff\x00", "base64"},
		{"control character past the preview", strings.Repeat("a", 4200) + "\x00", "base64"},
		{"text", strings.Repeat("a", 4200) + "é", "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, url := runningService(t)
			deadLetter(t, q, "m", tc.payload)
			tok := "Authorization: Bearer s3cret"
			out := mustWalq(t, 0, "", "dlq", "show", "--json", "--url", url, "-H", tok, "m").stdout
			human := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, "m").stdout
			require.NoError(t, q.Close())
			loc := mustWalq(t, 0, "", "dlq", "show", "--json", q.Dir(), "m").stdout
			var r, l struct {
				Enc     string `json:"payload_encoding"`
				Payload string `json:"payload"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &r))
			require.NoError(t, json.Unmarshal([]byte(loc), &l))
			assert.Equal(t, tc.want, l.Enc)
			assert.Equal(t, l.Enc, r.Enc, "payload_encoding of the same letter")
			assert.True(t, strings.HasPrefix(l.Payload, r.Payload[:len(r.Payload)-8]), "the preview is the payload's start, encoded alike")
			line, _, _ := strings.Cut(human[strings.Index(human, "payload:"):], "\n")
			assert.Equal(t, fmt.Sprintf("payload:    %d bytes, %s (a preview: the first 4096 bytes)", len(tc.payload), tc.want), line)
		})
	}
}

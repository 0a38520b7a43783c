package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestRemoteDLQListKeepsOddBytes: dlq list --url prints an id and a
// reason that are not valid UTF-8 with the bytes the local form prints
// (the dashboard sends them in base64 twins), in text and with --json.
func TestRemoteDLQListKeepsOddBytes(t *testing.T) {
	q, url := runningService(t)
	const id, reason = "\xff\xfe/order", "bad \xfe byte"
	_, err := q.Enqueue(context.Background(), []byte("job"), queue.WithID(id))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter(reason))
	tok := "Authorization: Bearer s3cret"
	remote := mustWalq(t, 0, "", "dlq", "list", "--url", url, "-H", tok).stdout
	remoteJSON := mustWalq(t, 0, "", "dlq", "list", "--json", "--url", url, "-H", tok).stdout
	require.NoError(t, q.Close())
	local := mustWalq(t, 0, "", "dlq", "list", q.Dir()).stdout
	localJSON := mustWalq(t, 0, "", "dlq", "list", "--json", q.Dir()).stdout

	require.Equal(t, fieldOf(t, local, 0), fieldOf(t, remote, 0), "the ID column")
	require.Equal(t, id, fieldOf(t, remote, 0))
	require.Equal(t, reason, lastColumn(t, remote, "bad"), "the REASON column")
	var l, r map[string]any
	require.NoError(t, json.Unmarshal([]byte(localJSON), &l))
	require.NoError(t, json.Unmarshal([]byte(remoteJSON), &r))
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s } // absent: ""
	for _, k := range []string{"id", "id_base64", "reason", "reason_base64"} {
		require.Equal(t, str(l, k), str(r, k), "%s: local %s remote %s", k, localJSON, remoteJSON)
	}
	require.NotEmpty(t, str(r, "id_base64"))
}

// fieldOf returns the i-th space-separated field of the first row after
// the header of a table that walq printed.
func fieldOf(t *testing.T, table string, i int) string {
	t.Helper()
	rows := strings.Split(strings.TrimSpace(table), "\n")
	require.GreaterOrEqual(t, len(rows), 2, table)
	f := strings.Fields(rows[1])
	require.Greater(t, len(f), i, table)
	return f[i]
}

// lastColumn returns the first row after the header of a table from the
// first occurrence of from to its end: its last column.
func lastColumn(t *testing.T, table, from string) string {
	t.Helper()
	rows := strings.Split(strings.TrimSpace(table), "\n")
	require.GreaterOrEqual(t, len(rows), 2, table)
	i := strings.Index(rows[1], from)
	require.GreaterOrEqual(t, i, 0, table)
	return rows[1][i:]
}

// TestRemoteDLQShowMatchesLocal: dlq show had no --url form, while dlq
// list had. With --url it prints a dead letter as the local form prints
// it, in text and with --json, its odd bytes kept; a payload longer than
// the dashboard's preview is printed as a preview and said to be one.
func TestRemoteDLQShowMatchesLocal(t *testing.T) {
	q, url := runningService(t)
	ctx := context.Background()
	const id, reason = "\xff\xfe/order", "bad \xfe byte"
	long := strings.Repeat("0123456789", 500)
	_, err := q.Enqueue(ctx, []byte("job\x00"), queue.WithID(id),
		queue.WithHeaders(map[string]string{"tenant": "acme", "raw": "\xfe"}))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte(long), queue.WithID("long"))
	require.NoError(t, err)
	for _, why := range []string{reason, "too long"} {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.DeadLetter(why))
	}
	tok := "Authorization: Bearer s3cret"
	remote := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, id).stdout
	remoteJSON := mustWalq(t, 0, "", "dlq", "show", "--json", "--url", url, "-H", tok, id).stdout
	remoteLong := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, "long").stdout
	remoteLongJSON := mustWalq(t, 0, "", "dlq", "show", "--json", "--url", url, "-H", tok, "long").stdout
	r := mustWalq(t, 5, "", "dlq", "show", "--url", url, "-H", tok, "alive")
	require.Contains(t, r.stderr, `no dead letter "alive"`)
	r = mustWalq(t, 1, "", "dlq", "show", "--url", url, "-H", tok)
	require.Contains(t, r.stderr, "want 1 arguments after --url URL")
	require.NoError(t, q.Close())
	local := mustWalq(t, 0, "", "dlq", "show", q.Dir(), id).stdout
	localJSON := mustWalq(t, 0, "", "dlq", "show", "--json", q.Dir(), id).stdout

	require.Equal(t, local, remote)
	require.Equal(t, localJSON, remoteJSON)
	require.Contains(t, remote, "id:         "+id+"\n")
	require.Contains(t, remote, "header:     raw=\xfe\n")

	require.Contains(t, remoteLong, "payload:    5000 bytes, text (a preview: the first 4096 bytes)\n"+long[:4096]+"\n")
	var d struct {
		Bytes     int    `json:"payload_bytes"`
		Payload   string `json:"payload"`
		Truncated bool   `json:"payload_truncated"`
	}
	require.NoError(t, json.Unmarshal([]byte(remoteLongJSON), &d))
	require.Equal(t, 5000, d.Bytes)
	require.Equal(t, long[:4096], d.Payload)
	require.True(t, d.Truncated)
}

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

package main_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// Ids, headers and payloads are bytes: --json prints those that are not
// valid UTF-8 in base64 (id_base64, headers_base64, payload_encoding
// "base64"), so that a reader of the output gets back the bytes stored.
// encoding/json alone writes U+FFFD for each invalid byte.
func TestJSONKeepsInvalidUTF8(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	ctx := context.Background()
	headers := map[string]string{"name\xfe": "v", "ok": "value\xff", "plain": "text é"}
	for _, id := range []string{"dead\xff", "live\xfe"} {
		_, err := q.Enqueue(ctx, []byte("\xffpayload of "+id), queue.WithID(id), queue.WithHeaders(headers))
		require.NoError(t, err)
	}
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("poison"))
	require.NoError(t, q.Close())

	outputs := map[string][]string{
		"dlq list": {"dlq", "list", "--json", dir},
		"dlq show": {"dlq", "show", "--json", dir, "dead\xff"},
		"dequeue":  {"dequeue", "--json", dir},
		"dump":     {"dump", dir},
	}
	for name, args := range outputs {
		t.Run(name, func(t *testing.T) {
			for _, j := range jsonLines[bytesJSON](t, mustWalq(t, 0, "", args...).stdout) {
				if j.Op != "" && j.Op != "enqueue" {
					continue
				}
				id := j.text(t, j.ID, j.IDBase64)
				require.Contains(t, []string{"dead\xff", "live\xfe"}, id)
				require.Equal(t, headers, j.headers(t), "headers of %q", id)
				require.Equal(t, "\xffpayload of "+id, j.text(t, j.Payload, b64If(j.Encoding, j.Payload)))
			}
		})
	}
}

// bytesJSON is the fields of an output line that carry stored bytes.
type bytesJSON struct {
	Op        string            `json:"op"`
	ID        string            `json:"id"`
	IDBase64  string            `json:"id_base64"`
	Headers   map[string]string `json:"headers"`
	Headers64 map[string]string `json:"headers_base64"`
	Payload   string            `json:"payload"`
	Encoding  string            `json:"payload_encoding"`
}

func b64If(enc, s string) string {
	if enc == "base64" {
		return s
	}
	return ""
}

// text returns the bytes of a field and its base64 twin.
func (bytesJSON) text(t *testing.T, text, b64 string) string {
	t.Helper()
	if b64 == "" {
		return text
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	return string(b)
}

func (j bytesJSON) headers(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range j.Headers {
		out[k] = v
	}
	for k, v := range j.Headers64 {
		out[j.text(t, "", k)] = j.text(t, "", v)
	}
	return out
}

// An id that is not UTF-8 is in id_base64: dump leaves id out, dequeue and
// dlq print it empty beside it, as the README says.
func TestJSONInvalidIDField(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	for _, id := range []string{"dead\xff", "live\xfe"} {
		_, err := q.Enqueue(context.Background(), []byte("x"), queue.WithID(id))
		require.NoError(t, err)
	}
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("poison"))
	require.NoError(t, q.Close())

	dump := mustWalq(t, 0, "", "dump", "--limit", "1", dir).stdout
	require.Contains(t, dump, `"id_base64":`)
	require.NotContains(t, dump, `"id":`)
	for _, args := range [][]string{{"dequeue", "--json", dir}, {"dlq", "list", "--json", dir}} {
		out := mustWalq(t, 0, "", args...).stdout
		require.Contains(t, out, `"id":"","id_base64":`, "walq %v", args)
	}
}

package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	require.NoError(t, m.DeadLetter("reason\xfd"))
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
				if id == "dead\xff" && name != "dump" {
					require.Equal(t, "reason\xfd", j.text(t, j.Reason, j.Reason64))
				}
			}
		})
	}
	dumped := jsonLines[bytesJSON](t, mustWalq(t, 0, "", "dump", dir).stdout)
	require.True(t, slices.ContainsFunc(dumped, func(j bytesJSON) bool {
		return j.Op == "dead" && j.text(t, j.Reason, j.Reason64) == "reason\xfd"
	}), "dump: the dead-letter's reason")
}

// The same for a sorted queue's keys, string sort keys and dead-letter
// reasons (key_base64, sort_base64, reason_base64).
func TestSortedJSONKeepsInvalidUTF8(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	s, err := queue.OpenSorted[string](dir, &queue.SortedOptions{Options: *fixtureOptions()})
	require.NoError(t, err)
	require.NoError(t, s.Publish(context.Background(), "sort\xff", "key\xfe", []byte("payload")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].DeadLetter("reason\xfd"))
	require.NoError(t, s.Close())

	dead := jsonLines[bytesJSON](t, mustWalq(t, 0, "", "dlq", "list", "--json", dir).stdout)
	require.Len(t, dead, 1)
	show := jsonLines[bytesJSON](t, mustWalq(t, 0, "", "dlq", "show", "--json", dir, dead[0].ID).stdout)
	for _, j := range append(dead, show...) {
		require.Equal(t, "key\xfe", j.text(t, j.Key, j.Key64))
		require.Equal(t, "sort\xff", j.text(t, j.sortText(t), j.Sort64))
		require.Equal(t, "reason\xfd", j.text(t, j.Reason, j.Reason64))
	}
	seen := map[string]bool{}
	for _, j := range jsonLines[bytesJSON](t, mustWalq(t, 0, "", "dump", dir).stdout) {
		if j.Op == "publish" {
			require.Equal(t, "key\xfe", j.text(t, j.Key, j.Key64))
			require.Equal(t, "sort\xff", j.text(t, j.sortText(t), j.Sort64))
			seen["publish"] = true
		}
		if j.Reason != "" || j.Reason64 != "" {
			require.Equal(t, "reason\xfd", j.text(t, j.Reason, j.Reason64), "dump: %s", j.Op)
			seen["reason"] = true
		}
	}
	require.Equal(t, map[string]bool{"publish": true, "reason": true}, seen)
}

// bytesJSON is the fields of an output line that carry stored bytes.
type bytesJSON struct {
	Op        string            `json:"op"`
	ID        string            `json:"id"`
	IDBase64  string            `json:"id_base64"`
	Headers   map[string]string `json:"headers"`
	Headers64 map[string]string `json:"headers_base64"`
	Key       string            `json:"key"`
	Key64     string            `json:"key_base64"`
	Sort      any               `json:"sort"`
	Sort64    string            `json:"sort_base64"`
	Reason    string            `json:"reason"`
	Reason64  string            `json:"reason_base64"`
	Payload   string            `json:"payload"`
	Encoding  string            `json:"payload_encoding"`
}

// sortText returns the sort field, a string sort key's text.
func (j bytesJSON) sortText(t *testing.T) string {
	t.Helper()
	if j.Sort == nil {
		return ""
	}
	s, ok := j.Sort.(string)
	require.True(t, ok, "sort %v", j.Sort)
	return s
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

// dlq list --json --url: the service's JSON names an id that is not valid
// UTF-8 in its ref (SEQ~HEX); the output prints it in id_base64.
func TestRemoteDLQKeepsInvalidUTF8ID(t *testing.T) {
	q, url := runningService(t)
	_, err := q.Enqueue(context.Background(), []byte("job"), queue.WithID("dead\xff"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad input"))
	r := mustWalq(t, 0, "", "dlq", "list", "--json", "--url", url, "-H", "Authorization: Bearer s3cret")
	ls := jsonLines[bytesJSON](t, r.stdout)
	require.Len(t, ls, 1)
	require.Equal(t, "dead\xff", ls[0].text(t, ls[0].ID, ls[0].IDBase64))
}

// dlq list --json --url: a valid id holding "~" (its ref is SEQ@ID) is
// printed as it is, not read as the hex of a SEQ~HEX ref.
func TestRemoteDLQTildeID(t *testing.T) {
	q, url := runningService(t)
	for _, id := range []string{"x~beef", "order~41"} {
		_, err := q.Enqueue(context.Background(), []byte("job"), queue.WithID(id))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.DeadLetter("bad input"))
	}
	r := mustWalq(t, 0, "", "dlq", "list", "--json", "--url", url, "-H", "Authorization: Bearer s3cret")
	ls := jsonLines[bytesJSON](t, r.stdout)
	require.Len(t, ls, 2)
	got := []string{ls[0].text(t, ls[0].ID, ls[0].IDBase64), ls[1].text(t, ls[1].ID, ls[1].IDBase64)}
	require.ElementsMatch(t, []string{"x~beef", "order~41"}, got)
}

// repair --json: a dropped message's id that is not valid UTF-8 is printed
// in dropped[].id_base64.
func TestRepairJSONKeepsInvalidUTF8ID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	for i := range 40 { // delayed: the snapshot holds them, their records stay in the log
		_, err := q.Enqueue(context.Background(), []byte(strings.Repeat("x", 300)),
			queue.WithID(fmt.Sprintf("msg-%03d\xff", i)), queue.WithDelay(time.Hour))
		require.NoError(t, err)
	}
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
	segs := segments(t, dir)
	require.Greater(t, len(segs), 1)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))

	r := mustWalq(t, 0, "", "repair", "--json", dir)
	var j struct {
		Dropped []bytesJSON `json:"dropped"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j))
	require.NotEmpty(t, j.Dropped)
	for _, d := range j.Dropped {
		id := d.text(t, d.ID, d.IDBase64)
		require.True(t, strings.HasPrefix(id, "msg-") && strings.HasSuffix(id, "\xff"), "dropped id %q", id)
	}
}

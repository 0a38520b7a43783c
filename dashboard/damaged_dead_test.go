package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestDamagedDeadLetterActions: a dead letter whose payload cannot be
// read is listed (DeadLetters lists it without payload); its view shows
// what the index knows of it, without payload, and its purge works, by
// its SEQ@ID reference only. ForQueue's view and purge failed with 500.
// Its requeue, which made it ready to fail again, is refused with 409.
func TestDamagedDeadLetterActions(t *testing.T) {
	for name, source := range map[string]func(*queue.Queue) dashboard.Source{
		"ForQueue":    dashboard.ForQueue,
		"ForAckQueue": func(q *queue.Queue) dashboard.Source { return dashboard.ForAckQueue(q) },
	} {
		t.Run(name, func(t *testing.T) {
			q, id := damagedDeadLetter(t)
			s := server(t, source(q), &dashboard.Options{Actions: true})
			same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
			refs := deadRefs(t, s.URL)
			require.Len(t, refs, 1)
			ref := refs[0]
			require.True(t, strings.HasSuffix(ref, "@"+id), ref)

			var m dashboard.Message
			require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(ref), &m))
			require.Equal(t, id, m.ID)
			require.Equal(t, ref, m.Ref)
			require.Equal(t, queue.StateDead.String(), m.State)
			require.Empty(t, m.Payload)
			require.Contains(t, m.Reason, "; corrupt record: ", "the view tells why there is no payload")

			var e struct{ Error string }
			stale := strings.TrimSuffix(ref, id) + "other"
			require.Equal(t, 404, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(stale), &e))
			code, msg := post(t, s.URL+"/queue/api/dead/purge", refBody(t, stale), same)
			require.Equal(t, 404, code, msg)
			bare := strings.TrimSuffix(ref, "@"+id)
			code, msg = post(t, s.URL+"/queue/api/dead/purge", refBody(t, bare), same)
			require.Equal(t, 400, code, msg)
			require.EqualValues(t, 1, q.Stats().Dead)

			code, msg = post(t, s.URL+"/queue/api/dead/requeue", refBody(t, ref), same)
			require.Equal(t, 409, code, "requeueing a letter that cannot be read is refused: %s", msg)
			require.Contains(t, msg, "not requeued")
			require.EqualValues(t, 1, q.Stats().Dead)
			require.EqualValues(t, 7, q.Stats().Ready, "the fillers only: nothing requeued")

			code, msg = post(t, s.URL+"/queue/api/dead/purge", refBody(t, ref), same)
			require.Equal(t, 200, code, msg)
			require.Zero(t, q.Stats().Dead, "the damaged letter is purged")
		})
	}
}

// damagedDeadLetter returns a queue whose one dead letter's payload lies
// in a damaged sealed segment, and the letter's id.
func damagedDeadLetter(t *testing.T) (*queue.Queue, string) {
	t.Helper()
	o := queue.Options{SegmentSize: 4096, ManualRequeue: true}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q, err := queue.Open(dir, &o)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	pad := string(bytes.Repeat([]byte("p"), 600))
	id, err := q.Enqueue(context.Background(), []byte("BROKEN|"+pad))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.NoError(t, m.DeadLetter("bad input"))
	for i := range 7 {
		_, err := q.Enqueue(context.Background(), []byte(fmt.Sprint("f", i, "|", pad)))
		require.NoError(t, err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 1, "the letter's segment is sealed")
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	i := bytes.Index(b, []byte("BROKEN"))
	require.GreaterOrEqual(t, i, 0)
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{b[i] ^ 0x20}, int64(i)) // a bad sector
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return q, id
}

// TestDamagedDeadValueRequeue: the requeue of a sorted queue's dead value
// whose payload cannot be read is refused with 409, as an ack queue's;
// its purge works.
func TestDamagedDeadValueRequeue(t *testing.T) {
	o := queue.SortedOptions{CacheBytes: -1, Options: queue.Options{SegmentSize: 4096, ManualRequeue: true}}
	testhook.SetManualCompaction(&o.Options)
	dir := t.TempDir()
	sq, err := queue.OpenSorted[int](dir, &o)
	require.NoError(t, err)
	ctx := context.Background()
	pad := string(bytes.Repeat([]byte("p"), 600))
	require.NoError(t, sq.Publish(ctx, 1, "broken", []byte("BROKEN|"+pad)))
	bs, err := sq.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("bad input"))
	for i := range 7 {
		require.NoError(t, sq.Publish(ctx, 100+i, fmt.Sprint("f", i), []byte(pad)))
	}
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 1, "the value's segment is sealed")
	require.NoError(t, sq.Close()) // nothing read before the damage is kept
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	i := bytes.Index(b, []byte("BROKEN"))
	require.GreaterOrEqual(t, i, 0)
	b[i] ^= 0x20
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))
	sq, err = queue.OpenSorted[int](dir, &o)
	require.NoError(t, err)
	t.Cleanup(func() { sq.Close() })

	s := server(t, dashboard.ForSorted(sq), &dashboard.Options{Actions: true})
	same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	refs := deadRefs(t, s.URL)
	require.Len(t, refs, 1)
	code, msg := post(t, s.URL+"/queue/api/dead/requeue", refBody(t, refs[0]), same)
	require.Equal(t, 409, code, msg)
	require.Contains(t, msg, "not requeued")
	require.Equal(t, 1, sq.Stats().SortedDead)
	code, msg = post(t, s.URL+"/queue/api/dead/purge", refBody(t, refs[0]), same)
	require.Equal(t, 200, code, msg)
	require.Zero(t, sq.Stats().SortedDead)
}

// failingPurge is an ack queue whose purge fails with damage of the log:
// a failure of the server, not a refusal of what the request names.
type failingPurge struct{ queue.AckQueue }

func (failingPurge) PurgeDead(string) error {
	return fmt.Errorf("%w: log damaged under the purge", queue.ErrCorrupt)
}

// TestDamagedPurgeNotRefused: every dead-letter action that failed with
// queue.ErrCorrupt answered 409, as a requeue refused for an unreadable
// letter does; a purge that fails so is the server's failure (500), and
// 409 is kept for the requeue's refusal.
func TestDamagedPurgeNotRefused(t *testing.T) {
	q := openQueue(t)
	deadLetter(t, q, "x")
	s := server(t, dashboard.ForAckQueue(failingPurge{q}), &dashboard.Options{Actions: true})
	same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	refs := deadRefs(t, s.URL)
	require.Len(t, refs, 1)
	code, msg := post(t, s.URL+"/queue/api/dead/purge", refBody(t, refs[0]), same)
	require.Equal(t, 500, code, msg)
	require.Contains(t, msg, "log damaged")
}

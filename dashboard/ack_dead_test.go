package dashboard_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestAckDeadRefAfterPowerLoss: under SyncNever a power loss can take a
// dead letter A, its enqueue and its dead-lettering, while the page that
// listed A is still open; the next run gives A's seq to a new message B,
// which dies too. The page's reference to A must not view, requeue or
// purge B (404, B stays dead as it was), through ForQueue and through the
// engines' shared method set (ForAckQueue); the reference the page lists
// now names B and works, and the pages follow the references.
func TestAckDeadRefAfterPowerLoss(t *testing.T) {
	for name, source := range map[string]func(*queue.Queue) dashboard.Source{
		"ForQueue":    dashboard.ForQueue,
		"ForAckQueue": func(q *queue.Queue) dashboard.Source { return dashboard.ForAckQueue(q) },
	} {
		t.Run(name, func(t *testing.T) {
			q, staleRef, aID := staleDeadLetter(t, source)
			ds, err := q.DeadLetters(0, 0)
			require.NoError(t, err)
			require.Len(t, ds, 1)
			b := ds[0]
			require.NotEqual(t, aID, b.ID)
			s := server(t, source(q), &dashboard.Options{Actions: true})
			same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}

			var e struct{ Error string }
			assert.Equal(t, 404, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(staleRef), &e),
				"the view of the lost A's reference %q showed B (%s)", staleRef, b.ID)
			for _, action := range []string{"requeue", "purge"} {
				code, msg := post(t, s.URL+"/queue/api/dead/"+action, refBody(t, staleRef), same)
				require.Equal(t, 404, code, "%s of the lost A's reference %q: %s", action, staleRef, msg)
				now, err := q.DeadLetters(0, 0)
				require.NoError(t, err)
				require.Equal(t, ds, now, "%s of a stale reference changed the dead set", action)
			}

			refs := deadRefs(t, s.URL)
			require.Len(t, refs, 1)
			require.NotEqual(t, staleRef, refs[0], "B's reference must differ from the lost A's")
			var m dashboard.Message
			require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(refs[0]), &m))
			require.Equal(t, b.ID, m.ID)
			code, msg := post(t, s.URL+"/queue/api/dead/requeue", refBody(t, refs[0]), same)
			require.Equal(t, 200, code, msg)
			got, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "keep", string(got.Payload), "the message kept from run 1 comes first")
			require.NoError(t, got.Ack())
			got, err = q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, b.ID, got.ID, "B, requeued by its own reference, is ready again")
		})
	}
}

// staleDeadLetter builds the state a power loss leaves: run 1 enqueues
// "keep" durably; run 2, under SyncNever with nothing made durable after
// its open, dead-letters A, whose reference the page (src's dashboard)
// lists; run 3, on the directory as run 2's open left it, dead-letters B
// under A's seq. It returns run 3's queue, A's reference and A's id.
func staleDeadLetter(t *testing.T, src func(*queue.Queue) dashboard.Source) (*queue.Queue, string, string) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "q")
	o := queue.Options{Sync: queue.SyncAlways, ManualRequeue: true}
	q, err := queue.Open(dir, &o)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("keep"))
	require.NoError(t, err)
	require.NoError(t, q.Close())

	fsys, err := crashfs.New(root, 0)
	require.NoError(t, err)
	o2 := o
	o2.Sync, o2.FS = queue.SyncNever, fsys
	o2.AppendOnly = true // no zeros fsynced ahead of the tail: nothing durable
	q, err = queue.Open(dir, &o2)
	require.NoError(t, err)
	opened, _ := fsys.Ops()
	img := readFiles(t, dir)
	aID, err := q.Enqueue(ctx, []byte("A"))
	require.NoError(t, err)
	deadLetterOnly(t, q, aID)
	s := server(t, src(q), nil)
	refs := deadRefs(t, s.URL)
	require.Len(t, refs, 1)
	if n, _ := fsys.Ops(); n != opened {
		t.Fatalf("run 2 made %d operations durable; the test needs none", n-opened)
	}
	if err := q.Close(); err != nil {
		t.Logf("close on the crash fs: %v", err)
	}

	dir3 := filepath.Join(t.TempDir(), "r")
	for rel, b := range img {
		p := filepath.Join(dir3, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, b, 0o600))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir3, "log"), 0o700))
	q, err = queue.Open(dir3, &o)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	bID, err := q.Enqueue(ctx, []byte("B"))
	require.NoError(t, err)
	deadLetterOnly(t, q, bID)
	ds, err := q.DeadLetters(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	listed := refs[0]
	require.Equal(t, bID, ds[0].ID)
	seq, _, _ := strings.Cut(listed, "@")
	require.Equal(t, seq, strconv.FormatUint(ds[0].Seq, 10), "the test needs B under the lost A's seq")
	return q, listed, aID
}

// deadLetterOnly dequeues the ready messages, dead-letters id's and
// gives the others back.
func deadLetterOnly(t *testing.T, q *queue.Queue, id string) {
	t.Helper()
	var others []*queue.Message
	for {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		if m == nil {
			t.Fatalf("no message %s to dead-letter", id)
		}
		if m.ID == id {
			require.NoError(t, m.DeadLetter("bad "+string(m.Payload)))
			break
		}
		others = append(others, m)
	}
	for _, m := range others {
		require.NoError(t, m.Nack(0))
	}
}

// deadRefs returns the references of the dead tab's pages, one a page.
func deadRefs(t *testing.T, base string) []string {
	t.Helper()
	var refs []string
	for after := ""; ; {
		var p dashboard.Page
		require.Equal(t, 200, getJSON(t, base+"/queue/api/messages?state=dead&limit=1&after="+url.QueryEscape(after), &p))
		for _, m := range p.Messages {
			refs = append(refs, m.Ref)
		}
		if after = p.Next; after == "" {
			return refs
		}
	}
}

func refBody(t *testing.T, ref string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"ref": ref})
	require.NoError(t, err)
	return string(b)
}

// readFiles reads every file under dir but its lock.
func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "LOCK" {
			return err
		}
		b, err := os.ReadFile(path)
		out[rel] = b
		return err
	}))
	return out
}

// TestAckDeadRefsPage: an ack queue's dead letters are listed as SEQ@ID,
// the pages follow those references, each views its own letter, and a
// reference pairing one letter's seq with another's id is refused.
func TestAckDeadRefsPage(t *testing.T) {
	for name, source := range map[string]func(*queue.Queue) dashboard.Source{
		"ForQueue":    dashboard.ForQueue,
		"ForAckQueue": func(q *queue.Queue) dashboard.Source { return dashboard.ForAckQueue(q) },
	} {
		t.Run(name, func(t *testing.T) {
			q := openQueue(t)
			for _, p := range []string{"one", "two", "three"} {
				deadLetter(t, q, p)
			}
			ds, err := q.DeadLetters(0, 0)
			require.NoError(t, err)
			require.Len(t, ds, 3)
			s := server(t, source(q), &dashboard.Options{Actions: true})
			want := make([]string, len(ds))
			for i, d := range ds {
				want[i] = strconv.FormatUint(d.Seq, 10) + "@" + d.ID
			}
			refs := deadRefs(t, s.URL)
			require.Equal(t, want, refs)
			for i, r := range refs {
				var m dashboard.Message
				require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(r), &m))
				require.Equal(t, ds[i].ID, m.ID)
				require.Equal(t, r, m.Ref)
			}
			mixed := strconv.FormatUint(ds[0].Seq, 10) + "@" + ds[1].ID
			var e struct{ Error string }
			require.Equal(t, 404, getJSON(t, s.URL+"/queue/api/message?ref="+url.QueryEscape(mixed), &e))
			same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
			for _, action := range []string{"requeue", "purge"} {
				code, msg := post(t, s.URL+"/queue/api/dead/"+action, refBody(t, mixed), same)
				require.Equal(t, 404, code, msg)
			}
			now, err := q.DeadLetters(0, 0)
			require.NoError(t, err)
			require.Equal(t, ds, now, "a mixed reference changed the dead set")
			code, msg := post(t, s.URL+"/queue/api/dead/purge", refBody(t, refs[1]), same)
			require.Equal(t, 200, code, msg)
			require.Equal(t, []string{refs[0], refs[2]}, deadRefs(t, s.URL))
		})
	}
}

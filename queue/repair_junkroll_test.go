package queue_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/walq/walq/queue"
)

// TestRepairJunkRoll: a crash during the queue's first roll leaves its
// first segment's bytes unreadable under the empty segment the roll
// created (the enqueue had not returned). Verify calls it a torn tail
// that the next open cuts, and a plain Open does cut it; Repair must not
// refuse what Verify calls repairable, and nothing may deliver the junk.
func TestRepairJunkRoll(t *testing.T) {
	live := t.TempDir()
	opts := &queue.Options{SegmentSize: 4096}
	q, err := queue.Open(live, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir() // the files as a crash leaves them: no close
	if err := os.CopyFS(base, os.DirFS(live)); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs := logSegments(t, base)
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	if err := os.Truncate(segs[1], 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segs[0], bytes.Repeat([]byte{0xa5}, 3000), 0o600); err != nil {
		t.Fatal(err)
	}
	crashed := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	c, err := queue.Verify(crashed(t), nil)
	if err != nil || c.Log.Torn == nil {
		t.Fatalf("Verify: %+v, %v; want a torn tail, repairable", c.Log, err)
	}
	opened := func(what string, q *queue.Queue, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s of what Verify calls a torn tail: %v", what, err)
			return
		}
		defer q.Close()
		if m, err := q.TryDequeue(); !errors.Is(err, queue.ErrEmpty) {
			t.Errorf("%s: TryDequeue = %d bytes, %v; want ErrEmpty (the enqueue never returned)", what, len(m.Payload), err)
		}
	}
	q, err = queue.Open(crashed(t), opts)
	opened("plain Open", q, err)
	// A salvage may refuse it (its bytes may be a synced entry's rot, whose
	// LSN nothing bounds), but never delivers it.
	if q, err = queue.Open(crashed(t), &queue.Options{Salvage: true}); !errors.Is(err, queue.ErrCorrupt) {
		opened("salvaging Open", q, err)
	}
	dir := crashed(t)
	if _, err := queue.Repair(dir, nil); err != nil {
		t.Errorf("Repair of what Verify calls a torn tail: %v", err)
	}
	q, err = queue.Open(dir, nil)
	opened("Open after Repair", q, err)
}

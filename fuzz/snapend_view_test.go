package fuzz_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestLogEndsBeforeSnapshotViews: on a directory whose last segment was
// cut below its snapshot's LSN (TestLogEndsBeforeSnapshot's cuts), the
// ways to look without changing anything never show an empty or another
// message's payload. A read-only Open refuses the directory with
// ErrCorrupt as a writable one does; a salvage preview (ReadOnly with
// Salvage) shows, through Browse and Peek of every state and through
// DeadLetters, only whole payloads, each its own message's and each
// message once; ReadLog's enqueue records carry their own payloads.
func TestLogEndsBeforeSnapshotViews(t *testing.T) {
	rng, _ := testRand(t)
	img, want := snapEndImage(t, rng)
	for _, c := range snapEndCuts(t, img) {
		t.Run(c.name, func(t *testing.T) {
			cut := maps(img)
			c.cut(cut)
			dir := filepath.Join(scratchDir(t), "q")
			if err := writeDir(dir, cut); err != nil {
				t.Fatal(err)
			}
			if q, err := queue.Open(dir, &queue.Options{ReadOnly: true, SegmentSize: 4096}); !errors.Is(err, queue.ErrCorrupt) {
				if err == nil {
					q.Close()
				}
				t.Fatalf("read-only Open of a log that ends before its snapshot: %v; want ErrCorrupt", err)
			}
			shown := checkPreviewPayloads(t, dir, want)
			records := checkReadLogPayloads(t, dir, want)
			t.Logf("preview showed %d payloads, ReadLog %d enqueue records", shown, records)
		})
	}
}

// checkPayload fails t unless p is the whole payload of the message whose
// token it carries.
func checkPayload(t *testing.T, what string, p []byte, want map[string][]byte) {
	t.Helper()
	if w, ok := want[tokenOf(p)]; !ok || !bytes.Equal(w, p) {
		t.Fatalf("%s: a wrong payload of %d bytes %q", what, len(p), p[:min(len(p), 20)])
	}
}

// checkPreviewPayloads opens dir as a salvage preview and checks every
// payload it shows; it returns how many it showed.
func checkPreviewPayloads(t *testing.T, dir string, want map[string][]byte) int {
	t.Helper()
	q, err := queue.Open(dir, &queue.Options{ReadOnly: true, Salvage: true, SegmentSize: 4096})
	if err != nil {
		t.Fatalf("salvage preview: %v", err)
	}
	defer q.Close()
	seen := map[string]bool{}
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		ms, err := q.Browse(st, 0, 1<<20)
		if err != nil {
			t.Fatalf("preview: browse %s: %v", st, err)
		}
		for _, m := range ms {
			full, err := q.Peek(m.Seq)
			if err != nil {
				t.Fatalf("preview: peek %s message %d: %v", st, m.Seq, err)
			}
			checkPayload(t, "preview: peek", full.Payload, want)
			if tok := tokenOf(full.Payload); seen[tok] {
				t.Fatalf("preview: message %s shown twice", tok)
			} else {
				seen[tok] = true
			}
		}
	}
	dead, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatalf("preview: dead letters: %v", err)
	}
	for _, d := range dead {
		checkPayload(t, "preview: dead letter", d.Payload, want)
	}
	if len(seen) == 0 {
		t.Fatal("the preview showed no message: nothing was checked")
	}
	return len(seen)
}

// checkReadLogPayloads reads dir's log with ReadLog and checks the
// payload of every enqueue record; it returns how many there were.
func checkReadLogPayloads(t *testing.T, dir string, want map[string][]byte) int {
	t.Helper()
	n := 0
	err := queue.ReadLog(dir, 0, func(r queue.Record) error {
		if r.Op == "enqueue" {
			checkPayload(t, "ReadLog", r.Payload, want)
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("ReadLog: %v", err)
	}
	return n
}

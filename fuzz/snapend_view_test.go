package fuzz_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
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
			records := checkReadLog(t, dir, "enqueue", want)
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

// checkReadLog reads dir's log with ReadLog and checks the payload of
// every record of kind: "enqueue" (an ack queue's) or "publish" (a sorted
// queue's, its copies forward included); it returns how many there were.
func checkReadLog(t *testing.T, dir, kind string, want map[string][]byte) int {
	t.Helper()
	n := 0
	err := queue.ReadLog(dir, 0, func(r queue.Record) error {
		switch {
		case kind == "enqueue" && r.Op == "enqueue":
			checkPayload(t, "ReadLog", r.Payload, want)
		case kind == "publish" && (r.Op == "publish" || (r.Op == "move" && r.Payload != nil)):
			checkSortedPayload(t, "ReadLog "+r.Op, r.Key, nil, r.Payload, want)
		default:
			return nil
		}
		n++
		return nil
	})
	if err != nil && !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("ReadLog: %v", err)
	}
	if n == 0 {
		t.Fatalf("ReadLog showed no %s record (%v): nothing was checked", kind, err)
	}
	return n
}

// TestSortedLogEndsBeforeSnapshotViews is TestLogEndsBeforeSnapshotViews
// for a sorted queue with dead values: a salvage preview (ReadOnly with
// Salvage) and a salvaging OpenSorted list only dead values whose payload
// is whole and their own, under their own key and sort key, each once;
// the keys they list count no more values than are pending; and ReadLog's
// publish records and copies carry their own payloads, before the salvage
// and after it.
func TestSortedLogEndsBeforeSnapshotViews(t *testing.T) {
	rng, _ := testRand(t)
	img, _, want := sortedSnapEndImage(t, rng)
	for _, c := range snapEndCuts(t, img) {
		t.Run(c.name, func(t *testing.T) {
			cut := maps(img)
			c.cut(cut)
			dir := filepath.Join(scratchDir(t), "q")
			if err := writeDir(dir, cut); err != nil {
				t.Fatal(err)
			}
			before := checkReadLog(t, dir, "publish", want)
			preview := queue.Options{ReadOnly: true, Salvage: true, SegmentSize: 4096}
			dead := checkSortedDeadValues(t, dir, preview, want)
			salvage := drainOptions()
			salvage.Salvage = true
			if n := checkSortedDeadValues(t, dir, salvage, want); n != dead {
				t.Errorf("the preview listed %d dead values, the salvage %d", dead, n)
			}
			after := checkReadLog(t, dir, "publish", want)
			t.Logf("%d dead values; ReadLog: %d values' records before the salvage, %d after", dead, before, after)
		})
	}
}

// checkSortedPayload fails t unless p is the whole payload of the value
// whose token it carries, published under key (unless "": a record that
// does not say) and sort (unless nil).
func checkSortedPayload(t *testing.T, what, key string, sort *int64, p []byte, want map[string][]byte) {
	t.Helper()
	tok := tokenOf(p)
	w, ok := want[tok]
	if !ok || !bytes.Equal(w, p) || (key != "" && !strings.Contains(tok, "/"+key+"/")) ||
		(sort != nil && !strings.HasSuffix(tok, fmt.Sprintf("/%s/%d", key, *sort))) {
		t.Fatalf("%s: key %q: a wrong payload of %d bytes %q", what, key, len(p), p[:min(len(p), 24)])
	}
}

// checkSortedDeadValues opens dir with o (a salvage or its preview),
// checks every dead value it lists and that each key it lists has its
// pending values, and returns how many dead values it listed. A salvage
// is closed without having changed anything but the log's damage.
func checkSortedDeadValues(t *testing.T, dir string, o queue.Options, want map[string][]byte) int {
	t.Helper()
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		t.Fatalf("OpenSorted (read-only %v, salvage %v): %v", o.ReadOnly, o.Salvage, err)
	}
	defer s.Close()
	ds, err := s.DeadValues(0, 0)
	if err != nil {
		t.Fatalf("DeadValues: %v", err)
	}
	if len(ds) == 0 {
		t.Fatal("no dead value listed: nothing was checked")
	}
	seen := map[string]bool{}
	for _, d := range ds {
		checkSortedPayload(t, "dead value", d.Key, &d.Sort, d.Payload, want)
		if tok := tokenOf(d.Payload); seen[tok] {
			t.Fatalf("dead value %s listed twice", tok)
		} else {
			seen[tok] = true
		}
	}
	keys, err := s.Keys("", 1<<20)
	if err != nil {
		t.Fatalf("Keys: %v", err)
	}
	values := 0
	for _, k := range keys {
		if k.Values <= 0 {
			t.Fatalf("key %q listed with %d values", k.Key, k.Values)
		}
		values += k.Values
	}
	if st := s.Stats(); int64(values) > int64(st.SortedPending) {
		t.Fatalf("Keys lists %d values, Stats %d pending", values, st.SortedPending)
	}
	return len(ds)
}

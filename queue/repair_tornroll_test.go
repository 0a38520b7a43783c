package queue_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// logSegments returns the paths of the segment files of the queue in dir,
// in order.
func logSegments(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, de := range des {
		if len(de.Name()) == 20 {
			segs = append(segs, filepath.Join(dir, "log", de.Name()))
		}
	}
	return segs
}

// TestSalvageTornRoll: the queue's log's first segment holds one message
// larger than SegmentSize, and a crash during the roll tears it under the
// empty segment the roll created (its Enqueue had not returned). A salvaging Open, read-only first, opens
// it as a plain Open does: a torn tail, and the queue goes on.
func TestSalvageTornRoll(t *testing.T) {
	live := t.TempDir()
	q, err := queue.Open(live, &queue.Options{SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // the files as a crash leaves them: no close, no snapshot
	if err := os.CopyFS(dir, os.DirFS(live)); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs := logSegments(t, dir)
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	if err := os.Truncate(segs[1], 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[0], 2500); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		q, err := queue.Open(dir, &queue.Options{SegmentSize: 4096, Salvage: true, ReadOnly: ro})
		if err != nil {
			t.Fatalf("salvaging Open (ReadOnly %v) after a torn roll: %v", ro, err)
		}
		if q.Recovery().Log.Torn == nil {
			t.Errorf("salvaging Open (ReadOnly %v): Recovery().Log = %+v, want the torn entry", ro, q.Recovery().Log)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	q, err = queue.Open(dir, &queue.Options{SegmentSize: 4096})
	if err != nil {
		t.Fatalf("plain Open after the salvage: %v", err)
	}
	defer q.Close()
	if _, err := q.Enqueue(context.Background(), []byte("next")); err != nil {
		t.Fatalf("Enqueue after the salvage: %v", err)
	}
}

// TestRepairMissingSegment: a queue written with a 4 KiB SegmentSize
// crashes, and a whole log segment before the empty tail is lost. Verify
// and Repair with default options (walq verify and walq repair cannot
// know the application's SegmentSize) never take the state for a torn
// roll: Verify reports damage, and Repair refuses or reports the lost
// records, whose sequence numbers are never given out again.
func TestRepairMissingSegment(t *testing.T) {
	live := t.TempDir()
	q, err := queue.Open(live, &queue.Options{SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := 0; i < n; i++ {
		if _, err := q.Enqueue(context.Background(), make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir() // the files as a crash leaves them: no close, no snapshot
	if err := os.CopyFS(dir, os.DirFS(live)); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs := logSegments(t, dir)
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	if err := os.Truncate(segs[len(segs)-1], 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segs[len(segs)-2]); err != nil {
		t.Fatal(err)
	}
	if chk, err := queue.Verify(dir, nil); err == nil || chk.Clean() {
		t.Errorf("Verify = %+v, %v; want the missing segment reported (ErrCorrupt)", chk, err)
	}
	rep, err := queue.Repair(dir, nil)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) {
			t.Fatalf("Repair: %v, want ErrCorrupt or a repair reporting the loss", err)
		}
		return
	}
	if len(rep.LostLSNs()) == 0 {
		t.Fatalf("Repair reports no lost record, but %s was lost", filepath.Base(segs[len(segs)-2]))
	}
	q, err = queue.Open(dir, &queue.Options{SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Enqueue(context.Background(), []byte("new")); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := q.TryDequeue()
		if err != nil || m == nil {
			t.Fatalf("the new message was not delivered: %v", err)
		}
		if string(m.Payload) == "new" {
			if m.Receipt.Seq <= n {
				t.Errorf("the new message has seq %d, one the lost segment's messages may have had (up to %d)", m.Receipt.Seq, n)
			}
			return
		}
	}
}

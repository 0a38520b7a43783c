package fuzz_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestTruncationKeepsOnlyUnsyncedSegment builds the power-loss state of a
// compaction of a drained queue whose snapshot ends a segment: the
// snapshot's truncation runs at the LSN after it, and keeps the segment
// that starts there, which the writers after the snapshot filled but no
// fsync covered yet (SyncNever). The truncation's directory fsyncs made the
// removal of every older segment durable; the power loss took the kept
// segment's unsynced bytes. Nothing acknowledged as durable is lost: the
// snapshot holds the whole queue (every message acked), and the records
// after it were never synced. Open must open it, with no message.
func TestTruncationKeepsOnlyUnsyncedSegment(t *testing.T) {
	dir := scratchDir(t)
	o := &queue.Options{SegmentSize: 4096, Sync: queue.SyncNever, SnapshotBytes: 1 << 30}
	testhook.SetManualCompaction(o)
	var pre map[string][]byte
	testhook.SetSnapshotStep(o, func(step string) {
		if step == "dir-synced" && pre == nil {
			var err error
			if pre, err = readDir(dir); err != nil {
				t.Error(err)
			}
		}
	})
	q := mustOpen(t, dir, o)
	for i := 0; i < 60; i++ {
		mustEnqueue(t, q, payload(fmt.Sprintf("D%d", i), 40+i))
	}
	for i := 0; i < 60; i++ {
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(pre)
	if len(pre) == 0 || len(segs) < 2 || len(snapshotFiles(pre)) != 1 {
		t.Fatalf("image before the truncation: %d files, segments %v", len(pre), segs)
	}
	// The segment the truncation keeps starts after the last entry of the
	// log as the snapshot left it (its records, and maybe a witness).
	tail := segs[len(segs)-1]
	kept := fmt.Sprintf("log/%020d", segIndex(t, tail)+entryCount(t, pre[tail]))
	for _, c := range []struct {
		name   string
		marker bool
	}{
		{"marker left", true},
		{"marker removed", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := maps(pre)
			for _, s := range segs {
				delete(img, s)
			}
			img[kept] = []byte{} // created and its name fsynced at the roll; its records never synced
			if c.marker {
				img[kept+".FRONT"] = nil
			}
			d := filepath.Join(scratchDir(t), "q")
			if err := writeDir(d, img); err != nil {
				t.Fatal(err)
			}
			opts := drainOptions()
			q, err := queue.Open(d, &opts)
			if err != nil {
				t.Fatalf("Open of a drained queue after a power loss inside its truncation: %v", err)
			}
			defer q.Close()
			if n, err := drainOpen(q); n != 0 || err != nil {
				t.Fatalf("drained %d messages (%v), want none", n, err)
			}
		})
	}
}

// entryCount counts the entries of a segment file (tidwall/wal's binary
// format: each entry is its length as a uvarint, then its bytes).
func entryCount(t *testing.T, b []byte) uint64 {
	t.Helper()
	n := uint64(0)
	for len(b) > 0 {
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			t.Fatalf("segment does not parse after %d entries", n)
		}
		b = b[k+int(size):]
		n++
	}
	return n
}

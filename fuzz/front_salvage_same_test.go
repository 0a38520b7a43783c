package fuzz_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSalvageFinishesOwnFront: a crash during a compaction's truncation
// leaves walq's NAME.FRONT marker of the same moment as the newest
// snapshot, with segments before it that the snapshot no longer needs. A
// salvaging Open, and its read-only preview, must not take it for a marker
// from a later moment: they open, the salvage finishes the truncation,
// and every message the queue holds is delivered with its own payload.
func TestSalvageFinishesOwnFront(t *testing.T) {
	dir := scratchDir(t)
	o := queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true, AckTimeout: time.Hour}
	testhook.SetManualCompaction(&o)
	var held map[string][]byte
	testhook.SetSnapshotStep(&o, func(step string) {
		if step == "dir-synced" && held == nil {
			var err error
			if held, err = readDir(dir); err != nil {
				t.Error(err)
			}
		}
	})
	q := mustOpen(t, dir, &o)
	ackedIDs(t, q, "A", 60) // records the snapshot no longer needs
	enqueueIDs(t, q, "P", 40)
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := readDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	kept := segmentFiles(after)
	if held == nil || len(segmentFiles(held)) <= len(kept) {
		t.Fatalf("the compaction removed no segment (%d before, %d after)", len(segmentFiles(held)), len(kept))
	}
	img := maps(held) // the crash: the truncation's marker written, no segment removed yet
	img[kept[0]+".FRONT"] = nil
	want := salvageDrain(t, writeImage(t, "moved", held), false)
	if len(want) != 40 {
		t.Fatalf("the queue holds %d messages, want 40", len(want))
	}
	po := drainOptions()
	po.Salvage, po.ReadOnly = true, true
	if ready, err := openPreview(writeImage(t, "preview", img), po, false); err != nil || ready != 40 {
		t.Errorf("salvage preview: %d ready, %v; want 40 ready", ready, err)
	}
	so := drainOptions()
	so.Salvage = true
	d, err := drainBoth(writeImage(t, "q", img), so, false)
	if err != nil {
		t.Fatalf("salvage beside its own interrupted truncation: %v", err)
	}
	if len(d.tokens) != len(want) {
		t.Errorf("salvage delivers %d messages, want %d", len(d.tokens), len(want))
	}
	for i, tok := range d.tokens {
		if w, ok := want[tok]; !ok || !bytes.Equal(d.payloads[i], w) {
			t.Errorf("salvage delivered %q with payload %q, not what the queue holds", tok, d.payloads[i])
		}
	}
}

package fuzz_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// TestSalvageFallsBackWhenLogEndsBeforeOlder: the newest snapshot is
// damaged and the log's segments from the keep-th on are gone. A log that
// still holds records continues the older snapshot, and one that holds
// none continues it too: the salvage and its preview rebuild from the
// older snapshot either way, so the producer ids it holds as acked stay
// refused (an empty log made it rebuild from nothing: "60 ids forgotten").
func TestSalvageFallsBackWhenLogEndsBeforeOlder(t *testing.T) {
	for _, keep := range []int{0, 1, 2} {
		t.Run(fmt.Sprint("segments kept ", keep), func(t *testing.T) {
			held := twoSnapshotImage(t)
			snaps := snapshotFiles(held)
			img := damaged(held, damageCase{file: snaps[1], damage: flipBit(int64(len(held[snaps[1]])/2), 2)})
			var segs []string
			for p := range img {
				if strings.HasPrefix(p, "log"+string(filepath.Separator)) || strings.HasPrefix(p, "log/") {
					segs = append(segs, p)
				}
			}
			slices.Sort(segs)
			for _, s := range segs[min(keep, len(segs)):] {
				delete(img, s)
			}
			rd := filepath.Join(scratchDir(t), "q")
			if err := writeDir(rd, img); err != nil {
				t.Fatal(err)
			}
			p, err := queue.Open(rd, &queue.Options{ReadOnly: true, Salvage: true})
			if err != nil {
				t.Fatalf("preview: %v", err)
			}
			pr := p.Recovery()
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := queue.Repair(rd, nil)
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			r := rep.Recovery
			if pr.SnapshotLSN != r.SnapshotLSN || pr.Replayed != r.Replayed || pr.Skipped != r.Skipped {
				t.Errorf("preview %d/%d/%d, repair %d/%d/%d (SnapshotLSN/Replayed/Skipped)",
					pr.SnapshotLSN, pr.Replayed, pr.Skipped, r.SnapshotLSN, r.Replayed, r.Skipped)
			}
			if r.SnapshotLSN == 0 {
				t.Errorf("the repair rebuilt from nothing, not from the older snapshot")
			}
			o := drainOptions()
			o.Clock, o.DedupWindow = nil, 24*time.Hour
			q, err := queue.Open(rd, &o)
			if err != nil {
				t.Fatalf("plain open after repair: %v", err)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if forgot := forgottenIDs(t, rd, 60); forgot > 0 {
				t.Errorf("%d ids forgotten", forgot)
			}
		})
	}
}

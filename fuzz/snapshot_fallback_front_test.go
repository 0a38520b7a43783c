package fuzz_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSalvageKeepsOlderSnapshotPastLostFront: the newest snapshot is
// damaged and the log's front segments are gone, so the log no longer
// continues the older, valid snapshot (records between it and the log's
// first are lost). What the older snapshot holds is still true: the salvage
// and its preview rebuild from it, note where the log starts
// (Recovery.LostBefore), report each of its pending messages whose record
// went with the front (Recovery.Dropped) and deliver none of those; the
// repair keeps every producer id it held as acked refused.
func TestSalvageKeepsOlderSnapshotPastLostFront(t *testing.T) {
	held := frontLossImage(t)
	snaps := snapshotFiles(held)
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v, want the older and the newer", snaps)
	}
	img := damaged(held, damageCase{file: snaps[1], damage: flipBit(int64(len(held[snaps[1]])/2), 2)})
	segs := segmentFiles(img)
	if len(segs) < 4 {
		t.Fatalf("segments %v, want four at least", segs)
	}
	for _, s := range segs[:len(segs)-2] {
		delete(img, s)
	}
	rd := filepath.Join(scratchDir(t), "q")
	if err := writeDir(rd, img); err != nil {
		t.Fatal(err)
	}
	older := snapshotLSN(t, snaps[0])
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
	t.Logf("older snapshot LSN %d; repair: SnapshotLSN %d LostBefore %d Replayed %d Dropped %v Rewritten %d",
		older, r.SnapshotLSN, r.LostBefore, r.Replayed, r.Dropped, r.Rewritten)
	if r.SnapshotLSN != older || r.LostBefore <= older+1 {
		t.Errorf("repair: SnapshotLSN %d, LostBefore %d; want %d (the older snapshot) and a lost front past it",
			r.SnapshotLSN, r.LostBefore, older)
	}
	if pr.SnapshotLSN != r.SnapshotLSN || pr.LostBefore != r.LostBefore || !slices.Equal(pr.Dropped, r.Dropped) {
		t.Errorf("preview SnapshotLSN %d LostBefore %d Dropped %v; repair %d, %d, %v",
			pr.SnapshotLSN, pr.LostBefore, pr.Dropped, r.SnapshotLSN, r.LostBefore, r.Dropped)
	}
	// The drain runs on a copy: its clock runs a day ahead, past the ids'
	// window, and the retries below are no messages of the history.
	after, err := readDir(rd)
	if err != nil {
		t.Fatal(err)
	}
	dd := filepath.Join(scratchDir(t), "drain")
	if err := writeDir(dd, after); err != nil {
		t.Fatal(err)
	}
	if forgot := forgottenIDs(t, rd, 60); forgot > 0 {
		t.Errorf("%d of 60 ids the older snapshot holds as acked enqueued again after the repair", forgot)
	}
	d, err := drainQueue(dd)
	if err != nil {
		t.Fatal(err)
	}
	checkFrontLossDrain(t, d, r, older)
}

// checkFrontLossDrain: every message drained carries its own payload.
// The leased message of the older snapshot, whose record went with the
// front, is reported dropped, not drained; its never-delivered ones (all
// at or before its LSN older) are drained or fall in the front reported
// lost (r.LostBefore), never both.
func checkFrontLossDrain(t *testing.T, d drained, r queue.Recovery, older uint64) {
	t.Helper()
	got := map[string]bool{}
	for i, tok := range d.tokens {
		if !bytes.Equal(d.payloads[i], payload(tok, 100)) {
			t.Errorf("drained %q with payload %q, not its own", tok, d.payloads[i])
		}
		got[tok] = true
	}
	dropped := map[string]bool{}
	for _, l := range r.Dropped {
		dropped[strings.TrimPrefix(l.ID, "id-")] = true
	}
	if got["L0"] || !dropped["L0"] {
		t.Errorf("leased L0 of the older snapshot: drained %v, reported dropped %v; want dropped only", got["L0"], dropped["L0"])
	}
	for i := range 5 {
		tok := fmt.Sprintf("P%d", i)
		if lost := r.LostBefore > older; got[tok] == lost {
			t.Errorf("never-delivered %s of the older snapshot: drained %v, in the front lost before LSN %d %v; want one of them",
				tok, got[tok], r.LostBefore, lost)
		}
	}
}

// frontLossImage returns the image of a queue directory taken while its
// second Compact had both snapshots on disk: the older one holds 60 acked
// producer ids (id-A0…), a leased message (id-L0) and 5 never-delivered
// ones (id-P0…), whose records lie in the log's front segments; round 2
// enqueued 80 more (id-B0…), over several segments.
func frontLossImage(t *testing.T) map[string][]byte {
	return secondCompactImage(t, func(q *queue.Queue) {
		ackedIDs(t, q, "A", 60)
		enqueueIDs(t, q, "L", 1)
		if _, err := q.TryDequeue(); err != nil { // leased through the repair: a delivery the snapshot holds
			t.Fatal(err)
		}
		enqueueIDs(t, q, "P", 5)
	}, func(q *queue.Queue) { enqueueIDs(t, q, "B", 80) })
}

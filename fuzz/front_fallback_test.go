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

// TestFrontFromLaterMomentFallback is TestFrontFromLaterMoment where the
// newest snapshot is damaged as well, so that a repair falls back to the
// older snapshot, or, when none is left, to the log alone: walq's own
// NAME.FRONT marker, from a later moment than either, would remove the
// records of never-delivered messages that the state the repair loads
// needs. Finishing it would lose them (kept only in the repair's backup);
// moving the marker out keeps every segment, and the repair then loses
// nothing but the damaged snapshot.
//
// Open, a read-only Open and Verify must refuse the directory, naming the
// marker and saying to move it out (ErrLaterFront, Check.Front), Verify
// listing the damaged snapshot as well; Repair must refuse it with that
// advice before its backup; none may change a file. Once the marker is moved out, Repair
// falls back and the queue drains every message with its own payload.
func TestFrontFromLaterMomentFallback(t *testing.T) {
	img, want := fallbackFrontImage(t)
	snaps := snapshotFiles(img)
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v, want the older and the newer", snaps)
	}
	segs := segmentFiles(img)
	if len(segs) < 4 {
		t.Fatalf("segments %v, want four at least", segs)
	}
	img = damaged(img, damageCase{file: snaps[1], damage: flipBit(int64(len(img[snaps[1]])/2), 2)})
	for _, c := range []struct {
		name      string
		keepOlder bool
	}{
		{"older snapshot kept", true},
		{"no older snapshot", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(img)
			if !c.keepOlder {
				delete(bad, snaps[0])
			}
			marker := segs[len(segs)-2] + ".FRONT"
			bad[marker] = nil
			dir := filepath.Join(scratchDir(t), "q")
			if err := writeDir(dir, bad); err != nil {
				t.Fatal(err)
			}
			checkFallbackFrontRefused(t, dir, bad, filepath.Base(marker))
			delete(bad, marker) // moved out
			moved := filepath.Join(scratchDir(t), "moved")
			if err := writeDir(moved, bad); err != nil {
				t.Fatal(err)
			}
			checkRepairedAll(t, moved, want, c.keepOlder)
		})
	}
}

// fallbackFrontImage returns the image of a queue directory taken while
// its second Compact had both snapshots on disk: the older one holds 20
// acked ids and 30 never-delivered messages (P0…), whose records lie in
// the log's first segments, which both snapshots need; round 2 enqueued
// 80 more (B0…), over several segments. It returns the image and the
// payload of every message it holds, by token.
func fallbackFrontImage(t *testing.T) (map[string][]byte, map[string][]byte) {
	img := secondCompactImage(t, func(q *queue.Queue) {
		ackedIDs(t, q, "A", 20)
		enqueueIDs(t, q, "P", 30)
	}, func(q *queue.Queue) { enqueueIDs(t, q, "B", 80) })
	want := make(map[string][]byte)
	for i := range 30 {
		tok := fmt.Sprintf("P%d", i)
		want[tok] = payload(tok, 100)
	}
	for i := range 80 {
		tok := fmt.Sprintf("B%d", i)
		want[tok] = payload(tok, 100)
	}
	return img, want
}

// checkFallbackFrontRefused checks that Open, a read-only Open, Verify and
// Repair refuse the directory dir, holding img with a damaged newest
// snapshot and walq's marker from a later moment than what a repair would
// fall back to, and that none changes a file: Verify and Repair name the
// marker and say to move it out (checkLaterFrontAdvised), and Verify
// still lists the damaged snapshot.
func checkFallbackFrontRefused(t *testing.T, dir string, img map[string][]byte, marker string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			showRepairLoss(t, img)
		}
	}()
	// Open and a read-only Open refuse the damaged snapshot, and say what
	// Repair says: the marker first, since a repair refuses it.
	o := drainOptions()
	if q, err := queue.Open(dir, &o); err == nil {
		n, derr := drainOpen(q)
		q.Close()
		t.Errorf("Open of a damaged snapshot succeeded, and drains %d messages (%v)", n, derr)
	} else if advice := "move " + marker + " out of the log directory"; !errors.Is(err, queue.ErrCorrupt) ||
		!errors.Is(err, queue.ErrLaterFront) || !strings.Contains(err.Error(), advice) {
		t.Errorf("Open: %v; want ErrCorrupt and ErrLaterFront saying %q", err, advice)
	}
	if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
		t.Fatalf("a refused Open changed the directory: %d files before, %d after (%v)", len(img), len(after), err)
	}
	checkReadOnlyAdvised(t, dir, img, marker, openReadOnly)
	c, _ := queue.Verify(dir, nil)
	if !strings.Contains(strings.Join(c.Problems, "\n"), "snapshot") {
		t.Errorf("Verify: Problems %q; want the damaged snapshot listed", c.Problems)
	}
	checkLaterFrontAdvised(t, dir, img, marker)
}

// showRepairLoss runs Repair on a copy of img and logs what it did and
// what the queue then delivers: what a refusal would have kept.
func showRepairLoss(t *testing.T, img map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "lossy")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	rep, err := queue.Repair(dir, nil)
	r := rep.Recovery
	t.Logf("Repair: %v; repaired %v, SnapshotLSN %d, SnapshotLost %s, LostBefore %d, Dropped %d, Replayed %d",
		err, rep.Repaired, r.SnapshotLSN, filepath.Base(r.SnapshotLost.Path), r.LostBefore, len(r.Dropped), r.Replayed)
	if err != nil {
		return
	}
	after, _ := readDir(dir)
	t.Logf("after Repair: %d segments (before: %d)", len(segmentFiles(after)), len(segmentFiles(img)))
	if d, err := drainQueue(dir); err == nil {
		t.Logf("after Repair, the queue drains %d messages", len(d.tokens))
	}
}

// checkRepairedAll checks that Repair of dir succeeds and that the queue
// then drains every message of want, each once, with its own payload.
// With an older snapshot the repair loses nothing; from the log alone,
// it reports the front the first Compact cut (acked messages) as lost.
func checkRepairedAll(t *testing.T, dir string, want map[string][]byte, older bool) {
	t.Helper()
	rep, err := queue.Repair(dir, nil)
	if err != nil {
		t.Fatalf("Repair with the marker moved out: %v", err)
	}
	if len(rep.Recovery.Dropped) != 0 || (older && rep.Recovery.LostBefore != 0) {
		t.Errorf("Repair with the marker moved out: Dropped %v, LostBefore %d; want nothing lost",
			rep.Recovery.Dropped, rep.Recovery.LostBefore)
	}
	d, err := drainQueue(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i, tok := range d.tokens {
		w, ok := want[tok]
		switch {
		case !ok || got[tok]:
			t.Errorf("drained %q, not enqueued or twice", tok)
		case !bytes.Equal(d.payloads[i], w):
			t.Errorf("drained %q with payload %q, want %q", tok, d.payloads[i], w)
		}
		got[tok] = true
	}
	if len(got) != len(want) {
		t.Errorf("drained %d messages of %d", len(got), len(want))
	}
}

// TestFrontFinishedFallback: a truncation that removed every segment
// before its marker and stopped before removing the marker (a crash
// between the two), beside a damaged newest snapshot and no older one.
// Finishing the marker removes nothing, so Verify must not name it, and
// Repair must go on past it: rebuilding from the log alone, it reports
// the records the truncation removed as lost, and the queue drains every
// message whose record the log still holds, each with its own payload.
func TestFrontFinishedFallback(t *testing.T) {
	img, want := fallbackFrontImage(t)
	snaps := snapshotFiles(img)
	segs := segmentFiles(img)
	if len(snaps) != 2 || len(segs) < 4 {
		t.Fatalf("snapshots %v, segments %v; want two and four at least", snaps, segs)
	}
	img = damaged(img, damageCase{file: snaps[1], damage: flipBit(int64(len(img[snaps[1]])/2), 2)})
	delete(img, snaps[0])
	keep := segs[len(segs)-2]
	img[keep+".FRONT"] = nil
	for _, s := range segs[:len(segs)-2] {
		delete(img, s)
	}
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	c, err := queue.Verify(dir, nil)
	if c.Front != "" || errors.Is(err, queue.ErrLaterFront) {
		t.Fatalf("Verify named a marker whose truncation removes nothing: Check.Front %q, %v", c.Front, err)
	}
	rep, err := queue.Repair(dir, nil)
	if err != nil || !rep.Repaired {
		t.Fatalf("Repair: %v (repaired %v)", err, rep.Repaired)
	}
	if rep.Recovery.LostBefore == 0 {
		t.Errorf("Repair: LostBefore 0; want where the log starts, past the removed segments")
	}
	d, err := drainQueue(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The kept segments hold the last of round 2's messages, B<k>…B79, in
	// order: exactly those drain.
	if len(d.tokens) == 0 {
		t.Fatalf("drained nothing; the kept segments hold messages")
	}
	for i, tok := range d.tokens {
		if w := fmt.Sprintf("B%d", 80-len(d.tokens)+i); tok != w || !bytes.Equal(d.payloads[i], want[w]) {
			t.Errorf("drained %q with payload %q as message %d; want %s with its own", tok, d.payloads[i], i, w)
		}
	}
}

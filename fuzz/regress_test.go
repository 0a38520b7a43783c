package fuzz_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// Regression tests for bugs the suite found in code outside fuzz/, kept
// with the failing case that showed each one. (Bugs fixed in queue/ have
// their regression tests in queue/regress_crash_test.go.)

// TestSalvageTailFirstEntry: when the damaged entry is the first entry
// of the tail segment, Salvage cuts the tail from it but reports the LSNs
// lost from the first valid entry after it: the damaged entry's own LSNs
// are missing from Recovery().Log.Salvaged (wal/repair.go,
// lostToSalvageCut: with no valid entry before the damage it starts the
// range at the next valid entry instead of at the end of the segment
// before).
func TestSalvageTailFirstEntry(t *testing.T) {
	rng, _ := testRand(t)
	img, _ := salvageImage(t, rng)
	segs := segmentFiles(img)
	tail := segs[len(segs)-1]
	ents := parseSegment(img[tail])
	c := damageCase{name: "CRC of the tail's first entry", file: tail,
		damage: flipBit(ents[0].off+int64(frameLen(ents[0])), 0), lost: [2]uint64{ents[0].first, ents[len(ents)-1].lastLSN()}}
	dir, rec, err := openSalvage(t, img, c)
	defer os.RemoveAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := rec.Log.Salvaged; len(s) != 1 || s[0].FirstLSN != c.lost[0] || s[0].LastLSN != c.lost[1] {
		t.Fatalf("Salvaged = %+v, want LSNs %d-%d", s, c.lost[0], c.lost[1])
	}
}

// TestSalvageFirstEntry: when the damaged entry is the log's first
// (the first after the snapshot), Salvage skips it, the log then starts
// after the snapshot's LSN+1, and queue.Open refuses with "log starts at
// LSN 2, after snapshot LSN 0" (queue/open.go, recover, step 3), although
// the report accounts for the gap. The wal report itself cannot say which
// LSNs were lost (wal/index.go, fillLost: FirstLSN 0 for a region at the
// start of the first segment).
func TestSalvageFirstEntry(t *testing.T) {
	rng, _ := testRand(t)
	img, toks := salvageImage(t, rng)
	first := segmentFiles(img)[0]
	ents := parseSegment(img[first])
	c := damageCase{name: "CRC of the log's first entry", file: first,
		damage: flipBit(ents[0].off+int64(frameLen(ents[0])), 0), lost: [2]uint64{1, ents[0].lastLSN()}}
	dir, rec, err := openSalvage(t, img, c)
	defer os.RemoveAll(dir)
	if errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("Open with Salvage: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s := rec.Log.Salvaged; len(s) != 1 || s[0].FirstLSN != 1 || filepath.Base(s[0].Segment) != filepath.Base(first) {
		t.Fatalf("Salvaged = %+v, want LSN 1 lost in %s", s, first)
	}
	drainAllBut(t, dir, c, toks)
}

// TestSnapshotTmpRemovedOnFailure: a snapshot whose write or fsync fails
// leaves its temporary file, snapshot-<LSN>.snap.tmp, behind
// (recovery/write.go, writeSynced returns without removing it). The next
// successful snapshot removes them, but while the disk stays full or over
// quota every attempt (the housekeeper retries as the log grows) leaves one
// more, each as large as the disk allowed: they pile up and take the space
// a recovery would need.
func TestSnapshotTmpRemovedOnFailure(t *testing.T) {
	rng, _ := testRand(t)
	cfg := childConfig{Mode: "ioerror", Dir: t.TempDir(), Seed: rng.Uint64(), Limit: 12 << 10, Segment: 4096, Lifetime: time.Minute}
	c := startChild(t, "TestIOErrors", cfg)
	for range c.lines {
	}
	<-c.done
	if tmps, _ := filepath.Glob(filepath.Join(cfg.Dir, "*.snap.tmp")); len(tmps) > 0 {
		t.Fatalf("%d temporary snapshot files left behind: %v", len(tmps), tmps)
	}
}

package fuzz_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/recovery"
)

// TestCrashBetweenMoveAndAdvance is a regression test found by the kill -9
// loop: a compaction copies never-delivered messages forward (move
// records) and then advances the cursor past their originals (an advance
// record), under one hold of the lock; but the log may put the two in
// different entries, and a crash between them kept the copies and lost
// the advance. Replay then had every copied message twice, as a ready copy
// and as an original ahead of the cursor: delivered twice, and a panic
// ("live lease does not apply") when the copy was leased first.
//
// The test builds that state exactly: it copies the directory when the
// compaction's second snapshot is written (the moves and the advance are
// in the log, nothing is truncated yet) and cuts the log just before the
// advance, re-framing the entry that held it.
func TestCrashBetweenMoveAndAdvance(t *testing.T) {
	dir := scratchDir(t)
	var images []map[string][]byte
	hook := func(step string) {
		if step == "written" {
			img, err := readDir(dir)
			if err != nil {
				t.Error(err)
			}
			images = append(images, img)
		}
	}
	clock := newManualClock()
	opts := &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true,
		Clock: clock, AckTimeout: time.Hour}
	testhook.SetSnapshotStep(opts, hook)
	q := mustOpen(t, dir, opts)
	o := fuzz.NewOracle()
	for i := 0; i < 40; i++ {
		tok := fmt.Sprintf("C%d", i)
		mustEnqueue(t, q, payload(tok, 80))
		o.Enqueued(tok)
	}
	// One message held and extended over and over: the log grows, the 39
	// never-delivered messages pin its start, so the compaction copies them.
	m, err := q.TryDequeue()
	if err != nil {
		t.Fatal(err)
	}
	o.Delivered(tokenOf(m.Payload))
	for i := 0; i < 400; i++ {
		if err := m.Extend(time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if st := lastMove(t, images); st == nil {
		t.Fatalf("the compaction copied nothing forward (%d snapshots written): the test needs a cursor move", len(images))
	} else {
		img := filepath.Join(scratchDir(t), "q")
		if err := writeDir(img, st); err != nil {
			t.Fatal(err)
		}
		d, err := drainQueue(img)
		if err != nil {
			t.Fatal(err)
		}
		if r := o.Recovered(d.tokens); !r.OK() {
			t.Fatalf("crash between the copies and the cursor advance: %s", r)
		}
	}
}

// lastMove returns, from the images taken when snapshots were written, a
// crash state that holds the cursor moves of the first image that has them
// but not the advance after them (nor any snapshot that reflects it), or
// nil. The first such image is the compaction's second snapshot, before
// the truncation it allows: a later one (Close's) has a log truncated past
// what any snapshot without the advance could replay from, a state no
// crash leaves.
func lastMove(t *testing.T, images []map[string][]byte) map[string][]byte {
	for i := 0; i < len(images); i++ {
		img := images[i]
		dir := filepath.Join(scratchDir(t), "read")
		if err := writeDir(dir, img); err != nil {
			t.Fatal(err)
		}
		var moved bool
		var advance uint64
		err := queue.ReadLog(dir, 0, func(r queue.Record) error {
			switch {
			case r.Op == "move":
				moved, advance = true, 0
			case r.Op == "advance" && moved && advance == 0:
				advance = r.LSN
			}
			return nil
		})
		os.RemoveAll(dir)
		if err != nil {
			t.Fatal(err)
		}
		if advance != 0 {
			return cutBefore(t, img, advance)
		}
	}
	return nil
}

// cutBefore returns img with the log cut just before LSN lsn (the entry
// holding it re-framed with the records before it) and without the
// snapshots at or after lsn.
func cutBefore(t *testing.T, img map[string][]byte, lsn uint64) map[string][]byte {
	out := make(map[string][]byte)
	for p, b := range img {
		if snaps := snapshotFiles(map[string][]byte{p: b}); len(snaps) == 1 {
			if info, _, err := recovery.Decode(b); err == nil && info >= lsn {
				continue
			}
		}
		if strings.HasSuffix(p, ".tmp") {
			continue
		}
		out[p] = b
	}
	segs := segmentFiles(img)
	for i, seg := range segs {
		for _, e := range parseSegment(img[seg]) {
			if e.first+uint64(e.count) <= lsn {
				continue
			}
			keep := slices.Clone(img[seg][:e.off])
			if n := int(lsn - e.first); n > 0 {
				keep = append(keep, frameEntry(e.first, e.synced, e.recs[:n])...)
			}
			out[seg] = keep
			for _, later := range segs[i+1:] {
				delete(out, later)
			}
			return out
		}
	}
	t.Fatalf("LSN %d is not in the log", lsn)
	return nil
}

package fuzz_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestStrayFrontMarker puts a NAME.FRONT file that names no segment into
// the log directory of a queue (one restored from another copy, or copied
// in from another queue's directory): walq writes one only for the first
// segment a truncation keeps, which exists as long as the marker does.
// Finishing the truncation it marks would remove every segment before NAME,
// every segment for a marker past the tail: a queue that never took a
// snapshot would then open empty, its messages gone without a word.
//
// Open (plain, salvaging and read-only), Verify and Repair must refuse it
// with ErrCorrupt naming it, and change no file; once it is moved out, the
// queue drains exactly what was enqueued.
func TestStrayFrontMarker(t *testing.T) {
	rng, _ := testRand(t)
	noSnap, noSnapWant := frontImage(t)
	story, storyWant := storyImage(t, rng)
	for _, c := range []struct {
		name string
		img  map[string][]byte
		want map[string][]byte
		at   func(segs []string) uint64 // the marker's index
	}{
		{"no snapshot, past the tail", noSnap, noSnapWant, func(segs []string) uint64 { return segIndex(t, segs[len(segs)-1]) + 5 }},
		{"no snapshot, inside a sealed segment", noSnap, noSnapWant, func(segs []string) uint64 { return segIndex(t, segs[1]) + 1 }},
		{"snapshot, past the tail", story, storyWant, func(segs []string) uint64 { return segIndex(t, segs[len(segs)-1]) + 5 }},
		{"snapshot, inside the first segment", story, storyWant, func(segs []string) uint64 { return segIndex(t, segs[0]) + 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(c.img)
			marker := fmt.Sprintf("log/%020d.FRONT", c.at(segmentFiles(bad)))
			bad[marker] = nil
			checkFrontRefused(t, bad, filepath.Base(marker))
			checkForeignKept(t, bad, marker)
			delete(bad, marker) // moved out
			dir := filepath.Join(scratchDir(t), "moved")
			if err := writeDir(dir, bad); err != nil {
				t.Fatal(err)
			}
			checkOpensClean(t, dir, c.want)
		})
	}
}

// frontImage is a crash image of a queue that never took a snapshot: 100
// messages enqueued over several segments, none delivered.
func frontImage(t *testing.T) (map[string][]byte, map[string][]byte) {
	t.Helper()
	dir := scratchDir(t)
	q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
	defer q.Close()
	want := make(map[string][]byte)
	for i := 0; i < 100; i++ {
		tok := fmt.Sprintf("N%d", i)
		p := payload(tok, 40+i%120)
		mustEnqueue(t, q, p)
		want[tok] = p
	}
	img, err := quietDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshotFiles(img)) != 0 || len(segmentFiles(img)) < 3 {
		t.Fatalf("image has %d snapshots, %d segments; the test needs none and three", len(snapshotFiles(img)), len(segmentFiles(img)))
	}
	return img, want
}

// checkFrontRefused checks that Open, a read-only Open and Verify refuse
// the image with ErrCorrupt and wal.ErrForeign naming the marker, and that
// no file changed.
func checkFrontRefused(t *testing.T, img map[string][]byte, marker string) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrCorrupt) || !errors.Is(err, wal.ErrForeign) || !strings.Contains(err.Error(), marker) {
			t.Errorf("%s: %v; want ErrCorrupt and wal.ErrForeign naming %s", what, err, marker)
		}
	}
	o := drainOptions()
	if q, err := queue.Open(dir, &o); err == nil {
		d, _ := drainOpen(q)
		t.Errorf("Open succeeded with a FRONT file that names no segment, and drains %d messages; Recovery: %+v", d, q.Recovery())
		q.Close()
	} else {
		refused("Open", err)
	}
	o.ReadOnly = true
	if q, err := queue.Open(dir, &o); err == nil {
		t.Errorf("read-only Open succeeded with a FRONT file that names no segment: %d ready", q.Stats().Ready)
		q.Close()
	} else {
		refused("read-only Open", err)
	}
	_, err := queue.Verify(dir, nil)
	refused("Verify", err)
	if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
		t.Fatalf("a refused Open changed the directory (%v)", err)
	}
}

// drainOpen counts the messages an open queue delivers.
func drainOpen(q *queue.Queue) (int, error) {
	n := 0
	for {
		_, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// TestFrontFromLaterMoment puts walq's own NAME.FRONT marker (naming a
// segment of the log) beside a snapshot older than the truncation it marks:
// a directory put back from copies made at different moments (the snapshot
// copied before a compaction, the log during the truncation that followed
// it, the newer snapshot not copied). The segments still hold every record
// the old snapshot needs, so the directory is whole without the marker; a
// plain Open used to finish the truncation first, removing them, and then
// refuse the log as missing them. Open must refuse it with ErrCorrupt
// naming the marker and change nothing; once it is moved out, the queue
// drains exactly what was enqueued. A marker that removes nothing the
// snapshot needs is finished as before.
func TestFrontFromLaterMoment(t *testing.T) {
	rng, _ := testRand(t)
	img, want := storyImage(t, rng)
	segs := segmentFiles(img)
	for _, c := range []struct {
		name    string
		keep    string // the segment the marker names
		refused bool
	}{
		{"marker keeps the third segment", segs[2], true},
		{"marker keeps the tail alone", segs[len(segs)-1], true},
		{"marker keeps the first segment", segs[0], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(img)
			marker := c.keep + ".FRONT"
			bad[marker] = nil
			dir := filepath.Join(scratchDir(t), "q")
			if err := writeDir(dir, bad); err != nil {
				t.Fatal(err)
			}
			o := drainOptions()
			q, err := queue.Open(dir, &o)
			if !c.refused {
				if err != nil {
					t.Fatalf("Open with a marker that removes nothing the snapshot needs: %v", err)
				}
				q.Close()
				checkOpensClean(t, dir, want)
				return
			}
			if err == nil {
				n, derr := drainOpen(q)
				q.Close()
				t.Fatalf("Open finished a truncation past what the snapshot needs, and drains %d messages (%v)", n, derr)
			}
			if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(marker)) {
				t.Fatalf("Open: %v; want ErrCorrupt naming %s", err, filepath.Base(marker))
			}
			if after, err := readDir(dir); err != nil || !sameFiles(bad, after) {
				t.Fatalf("a refused Open changed the directory: %d files before, %d after (%v)", len(bad), len(after), err)
			}
			checkReadOnlyAdvised(t, dir, bad, filepath.Base(marker), openReadOnly)
			checkLaterFrontAdvised(t, dir, bad, filepath.Base(marker))
			delete(bad, marker) // moved out
			moved := filepath.Join(scratchDir(t), "moved")
			if err := writeDir(moved, bad); err != nil {
				t.Fatal(err)
			}
			checkOpensClean(t, moved, want)
		})
	}
}

// checkLaterFrontAdvised checks that Verify and Repair, on the directory
// dir holding img with walq's own marker from a later moment than the
// snapshot, give Open's advice: Verify's error and Check name the marker
// and say to move it out of the log directory, not to repair; Repair
// refuses it with that advice before its backup, changing no file, where
// its salvage would finish the truncation and lose the records the
// snapshot needs.
func checkLaterFrontAdvised(t *testing.T, dir string, img map[string][]byte, marker string) {
	t.Helper()
	advice := "move " + marker + " out of the log directory"
	advised := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrCorrupt) || !errors.Is(err, queue.ErrLaterFront) || !strings.Contains(err.Error(), advice) {
			t.Errorf("%s: %v; want ErrCorrupt and ErrLaterFront saying %q", what, err, advice)
			return
		}
		if strings.Contains(err.Error(), "to recover, run 'walq repair DIR'") {
			t.Errorf("%s: %v; advises a repair, which would finish the truncation", what, err)
		}
	}
	c, err := queue.Verify(dir, nil)
	advised("Verify", err)
	if !strings.Contains(c.Front, advice) || c.Clean() {
		t.Errorf("Verify: Check.Front %q, Clean %v; want it saying %q", c.Front, c.Clean(), advice)
	}
	backedUp := false
	rep, err := queue.Repair(dir, &queue.RepairOptions{Backup: func() error { backedUp = true; return nil }})
	advised("Repair", err)
	if backedUp || rep.Repaired {
		t.Errorf("Repair backed up (%v) or salvaged (%v) a directory whose truncation marker it refuses; Recovery: %+v",
			backedUp, rep.Repaired, rep.Recovery)
	}
	if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
		t.Fatalf("a refused Repair changed the directory: %d files before, %d after (%v)", len(img), len(after), err)
	}
}

// TestSortedFrontMarkers is TestStrayFrontMarker and
// TestFrontFromLaterMoment for a sorted queue, whose open shares the log
// and the recovery: a marker that names no segment, and walq's own marker
// that would remove records its snapshot needs, are refused with
// ErrCorrupt naming the marker, changing nothing; Verify and Repair give
// the open's advice for the latter.
func TestSortedFrontMarkers(t *testing.T) {
	rng, _ := testRand(t)
	img, _ := sortedDamageImage(t, rng)
	segs := segmentFiles(img)
	for _, c := range []struct {
		name   string
		marker string
		later  bool // walq's own marker, from a later moment than the snapshot
	}{
		{"marker names no segment", fmt.Sprintf("log/%020d.FRONT", segIndex(t, segs[len(segs)-1])+5), false},
		{"marker past what the snapshot needs", segs[2] + ".FRONT", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDamaged(t, "q", img, damageCase{file: c.marker, damage: func([]byte) []byte { return []byte{} }})
			before, err := readDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			o := drainOptions()
			s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
			if err == nil {
				s.Close()
				t.Fatalf("OpenSorted finished the truncation %s marks", filepath.Base(c.marker))
			}
			if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(c.marker)) {
				t.Fatalf("OpenSorted: %v; want ErrCorrupt naming %s", err, filepath.Base(c.marker))
			}
			if after, err := readDir(dir); err != nil || !sameFiles(before, after) {
				t.Fatalf("a refused OpenSorted changed the directory: %d files before, %d after (%v)", len(before), len(after), err)
			}
			if c.later {
				checkReadOnlyAdvised(t, dir, before, filepath.Base(c.marker), openSortedReadOnly)
				checkLaterFrontAdvised(t, dir, before, filepath.Base(c.marker))
			}
		})
	}
}

// checkReadOnlyAdvised checks that a read-only Open (as walq stats, dump
// and dlq list open), made by open, refuses the directory dir, holding img
// with walq's own marker from a later moment than the snapshot, with
// Open's error: ErrCorrupt and ErrLaterFront, naming the marker and saying
// to move it out, not to repair (which refuses it), nor that a segment is
// missing; and that it changes no file.
func checkReadOnlyAdvised(t *testing.T, dir string, img map[string][]byte, marker string, open func(string) (int64, error)) {
	t.Helper()
	advice := "move " + marker + " out of the log directory"
	ready, err := open(dir)
	switch {
	case err == nil:
		t.Errorf("read-only Open succeeded beside a truncation marker from a later moment: %d ready", ready)
	case !errors.Is(err, queue.ErrCorrupt) || !errors.Is(err, queue.ErrLaterFront) || !strings.Contains(err.Error(), advice):
		t.Errorf("read-only Open: %v; want ErrCorrupt and ErrLaterFront saying %q", err, advice)
	case strings.Contains(err.Error(), "to recover, run 'walq repair DIR'"):
		t.Errorf("read-only Open: %v; advises a repair, which refuses the marker", err)
	}
	if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
		t.Fatalf("a refused read-only Open changed the directory: %d files before, %d after (%v)", len(img), len(after), err)
	}
}

// openReadOnly opens the ack queue in dir read-only and returns how many
// messages are ready.
func openReadOnly(dir string) (int64, error) {
	o := drainOptions()
	o.ReadOnly = true
	q, err := queue.Open(dir, &o)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	return int64(q.Stats().Ready), nil
}

// openSortedReadOnly opens the sorted queue in dir read-only and returns
// how many values are pending.
func openSortedReadOnly(dir string) (int64, error) {
	o := drainOptions()
	o.ReadOnly = true
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return int64(s.Stats().SortedPending), nil
}

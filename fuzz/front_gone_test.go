package fuzz_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestFrontGoneFromLaterMoment puts walq's own NAME.FRONT marker beside a
// snapshot older than the truncation it marks, with every segment before
// the marker already removed: the truncation stopped between removing the
// segments and removing its marker, the snapshot was copied before the
// compaction, the newer one was not. The log no longer holds the records
// the snapshot needs, so Open refuses the directory, as a segment missing
// (moving the marker out brings nothing back, and a repair does not refuse
// it: not ErrLaterFront). It must refuse it changing nothing, the marker
// included, as every other refusal of Open leaves the directory as it
// was: the marker is what shows that the log was cut after a newer
// snapshot, whose copy puts the directory back whole. A read-only Open
// and Verify refuse it the same way, changing nothing.
func TestFrontGoneFromLaterMoment(t *testing.T) {
	rng, _ := testRand(t)
	img, _ := storyImage(t, rng)
	segs := segmentFiles(img)
	if len(segs) < 4 {
		t.Fatalf("segments %v, want four at least", segs)
	}
	bad := maps(img)
	marker := segs[2] + ".FRONT"
	bad[marker] = nil
	delete(bad, segs[0])
	delete(bad, segs[1])
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, bad); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrCorrupt) || errors.Is(err, queue.ErrLaterFront) {
			t.Errorf("%s: %v; want ErrCorrupt (a segment is missing), not ErrLaterFront", what, err)
		}
		if after, rerr := readDir(dir); rerr != nil || !sameFiles(bad, after) {
			_, kept := after[marker]
			t.Fatalf("a refused %s changed the directory: %d files before, %d after, marker kept %v (%v); %s: %v",
				what, len(bad), len(after), kept, rerr, what, err)
		}
	}
	o := drainOptions()
	if q, err := queue.Open(dir, &o); err == nil {
		n, derr := drainOpen(q)
		q.Close()
		t.Fatalf("Open of a log cut past what the snapshot needs succeeded, and drains %d messages (%v)", n, derr)
	} else {
		refused("Open", err)
	}
	o.ReadOnly = true
	if q, err := queue.Open(dir, &o); err == nil {
		q.Close()
		t.Fatalf("read-only Open of a log cut past what the snapshot needs succeeded")
	} else {
		refused("read-only Open", err)
	}
	_, err := queue.Verify(dir, nil)
	refused("Verify", err)
}

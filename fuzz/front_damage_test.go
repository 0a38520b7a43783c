package fuzz_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestFrontFromLaterMomentDamaged is TestFrontFromLaterMoment's refused
// case (walq's own NAME.FRONT beside a snapshot older than the truncation
// it marks) where what the marker keeps is damaged as well, or holds no
// entry:
//
//   - the first entry of a kept sealed segment flipped. Open must refuse it,
//     since the log is damaged, and change no file: finishing the
//     truncation would remove the records the snapshot needs, and a repair
//     afterwards could no longer give them back (with every segment kept,
//     moving the marker out and repairing loses only the damaged segment's
//     records);
//   - the marker keeps the tail alone, and the tail holds no entry: the log
//     left would be empty, and the snapshot's messages need records before
//     it.
func TestFrontFromLaterMomentDamaged(t *testing.T) {
	rng, _ := testRand(t)
	img, _ := storyImage(t, rng)
	segs := segmentFiles(img)
	if len(segs) < 5 {
		t.Fatalf("segments %v, want five at least", segs)
	}
	tail := segs[len(segs)-1]
	for _, c := range []struct {
		name   string
		damage damageCase
		keep   string // the segment the marker names
	}{
		{"first entry of a kept sealed segment flipped", damageCase{file: segs[3], damage: flipBit(10, 3)}, segs[2]},
		{"the tail kept alone, emptied", damageCase{file: tail, damage: func([]byte) []byte { return []byte{} }}, tail},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkFrontDamagedRefused(t, damaged(img, c.damage), c.keep+".FRONT")
		})
	}
}

// checkFrontDamagedRefused checks that Open refuses the image with the
// marker added, with ErrCorrupt, and changes no file, and that Verify and
// Repair name the marker first (checkLaterFrontAdvised): moved out, a
// repair loses only the damaged segment's records.
func checkFrontDamagedRefused(t *testing.T, img map[string][]byte, marker string) {
	t.Helper()
	bad := maps(img)
	bad[marker] = nil
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, bad); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err == nil {
		n, derr := drainOpen(q)
		q.Close()
		t.Fatalf("Open of a damaged log succeeded, and drains %d messages (%v)", n, derr)
	}
	if !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("Open: %v; want ErrCorrupt", err)
	}
	after, rerr := readDir(dir)
	if rerr != nil || !sameFiles(bad, after) {
		var gone []string
		for name := range bad {
			if _, ok := after[name]; !ok {
				gone = append(gone, name)
			}
		}
		t.Fatalf("a refused Open changed the directory: %d files before, %d after, gone %v (%v); Open: %v",
			len(bad), len(after), gone, rerr, err)
	}
	checkReadOnlyAdvised(t, dir, bad, filepath.Base(marker), openReadOnly)
	checkLaterFrontAdvised(t, dir, bad, filepath.Base(marker))
}

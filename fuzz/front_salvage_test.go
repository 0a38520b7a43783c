package fuzz_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSalvageFrontFromLaterMoment is TestFrontFromLaterMoment and
// TestFrontFromLaterMomentFallback for a salvaging Open (Options.Salvage),
// of an ack queue and of a sorted one, and for its read-only preview:
// walq's own NAME.FRONT marker, from a later moment than the snapshot
// loaded (or than what the salvage falls back to beside a damaged newest
// snapshot), would remove segments that hold durable messages no one
// has received, intact on disk. A salvage skips damaged entries; it must
// not destroy intact ones. It must refuse the marker as Open does
// (ErrCorrupt, ErrLaterFront, saying to move it out), changing no file;
// once the marker is moved out, the salvage delivers every message the
// directory holds, each with its own payload.
func TestSalvageFrontFromLaterMoment(t *testing.T) {
	rng, _ := testRand(t)
	story, _ := storyImage(t, rng)
	fallback, _ := fallbackFrontImage(t)
	snaps := snapshotFiles(fallback)
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v, want the older and the newer", snaps)
	}
	fallback = damaged(fallback, damageCase{file: snaps[1], damage: flipBit(int64(len(fallback[snaps[1]])/2), 2)})
	noOlder := maps(fallback)
	delete(noOlder, snaps[0])
	sorted, _ := sortedDamageImage(t, rng)
	for _, c := range []struct {
		name   string
		img    map[string][]byte
		keep   func(segs []string) string // the segment the marker names
		sorted bool
	}{
		{"snapshot loaded", story, func(segs []string) string { return segs[2] }, false},
		{"damaged newest snapshot, older kept", fallback, func(segs []string) string { return segs[len(segs)-2] }, false},
		{"damaged newest snapshot, no older", noOlder, func(segs []string) string { return segs[len(segs)-2] }, false},
		{"sorted queue", sorted, func(segs []string) string { return segs[2] }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := c.keep(segmentFiles(c.img)) + ".FRONT"
			// What the directory holds: the salvage of a copy with the
			// marker moved out.
			want := salvageDrain(t, writeImage(t, "moved", c.img), c.sorted)
			if len(want) == 0 {
				t.Fatal("the directory holds no message; the test needs some")
			}
			bad := maps(c.img)
			bad[marker] = nil
			dir := writeImage(t, "q", bad)
			checkSalvageRefused(t, dir, bad, filepath.Base(marker), want, c.sorted)
		})
	}
}

// checkSalvageRefused checks that a salvaging Open and its read-only
// preview refuse dir, holding img with a marker from a later moment,
// with ErrCorrupt and ErrLaterFront saying to move the marker out, and
// change no file. want is what the salvage delivers with the marker moved
// out: a salvage that opens anyway is reported with what it lost of it.
func checkSalvageRefused(t *testing.T, dir string, img map[string][]byte, marker string, want map[string][]byte, sorted bool) {
	t.Helper()
	advice := "move " + marker + " out of the log directory"
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrCorrupt) || !errors.Is(err, queue.ErrLaterFront) || !strings.Contains(err.Error(), advice) {
			t.Errorf("%s: %v; want ErrCorrupt and ErrLaterFront saying %q", what, err, advice)
		}
	}
	o := drainOptions()
	o.Salvage, o.ReadOnly = true, true
	if ready, err := openPreview(dir, o, sorted); err == nil {
		t.Errorf("salvage preview opened beside a marker from a later moment: %d ready of the %d the directory holds",
			ready, len(want))
	} else {
		refused("salvage preview", err)
	}
	if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
		t.Fatalf("a refused salvage preview changed the directory: %d files before, %d after (%v)", len(img), len(after), err)
	}
	o.ReadOnly = false
	d, err := drainBoth(dir, o, sorted)
	if err != nil {
		refused("salvaging Open", err)
		if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
			t.Fatalf("a refused salvaging Open changed the directory: %d files before, %d after (%v)", len(img), len(after), err)
		}
		return
	}
	got := map[string]bool{}
	for i, tok := range d.tokens {
		if w, ok := want[tok]; !ok || !bytes.Equal(d.payloads[i], w) {
			t.Errorf("salvage delivered %q with payload %q, not what the directory holds", tok, d.payloads[i])
		}
		got[tok] = true
	}
	lost, lostBytes := 0, 0
	for tok, p := range want {
		if !got[tok] {
			lost++
			lostBytes += len(p)
		}
	}
	t.Errorf("salvaging Open finished the truncation of %s: it delivers %d of the %d messages the directory holds, "+
		"%d lost for good (%d payload bytes, intact on disk before the open); Recovery: LostBefore %d, Dropped %d",
		marker, len(got), len(want), lost, lostBytes, d.recovery.LostBefore, len(d.recovery.Dropped))
}

// salvageDrain returns every message a salvaging open of dir delivers,
// payload by token.
func salvageDrain(t *testing.T, dir string, sorted bool) map[string][]byte {
	t.Helper()
	o := drainOptions()
	o.Salvage = true
	d, err := drainBoth(dir, o, sorted)
	if err != nil {
		t.Fatalf("salvage with the marker moved out: %v", err)
	}
	out := make(map[string][]byte, len(d.tokens))
	for i, tok := range d.tokens {
		if _, dup := out[tok]; dup {
			t.Fatalf("salvage with the marker moved out delivered %q twice", tok)
		}
		out[tok] = d.payloads[i]
	}
	return out
}

// drainBoth drains the ack queue, or the sorted queue, in dir with o.
func drainBoth(dir string, o queue.Options, sorted bool) (drained, error) {
	if sorted {
		return drainSortedWith(dir, o)
	}
	return drainWith(dir, o)
}

// openPreview opens the queue in dir with o (read-only) and returns how
// many messages, or sorted values, are ready.
func openPreview(dir string, o queue.Options, sorted bool) (int64, error) {
	if sorted {
		s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		return int64(s.Stats().SortedPending), nil
	}
	q, err := queue.Open(dir, &o)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	return int64(q.Stats().Ready), nil
}

// writeImage writes img to a new directory named name and returns it.
func writeImage(t *testing.T, name string, img map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(scratchDir(t), name)
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	return dir
}

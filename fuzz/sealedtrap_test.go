package fuzz_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSealedSegmentTraps applies tidwall/wal's known traps to sealed
// segments, where the tail repair does not look: 4096 zero bytes appended
// (tidwall/wal reads them as 4096 empty entries), and a frame length
// changed so that the segment frames differently from there on
// (tidwall/wal has no checksum to notice). Open must refuse each with
// ErrCorrupt, naming the way out and changing nothing, or the drain must
// fail with ErrCorrupt or be exact, as for any damage (README "mid-log and
// snapshot damage"); a salvaging open must deliver only whole payloads of
// messages that were enqueued, each once, never an empty or phantom one.
func TestSealedSegmentTraps(t *testing.T) {
	rng, _ := testRand(t)
	img, want := storyImage(t, rng)
	segs := segmentFiles(img)
	middle, lastSealed := segs[len(segs)/2], segs[len(segs)-2]
	cases := []struct {
		name   string
		seg    string
		damage func([]byte) []byte
	}{
		{"zeros appended to a middle segment", middle, appendZeros},
		{"zeros appended to the last sealed segment", lastSealed, appendZeros},
		{"last frame of a middle segment one byte shorter", middle, reframeLast(-1)},
		{"last frame of the last sealed segment one byte shorter", lastSealed, reframeLast(-1)},
		{"first frame of a middle segment 200 bytes longer", middle, reframeFirst(200)},
		{"first frame of a middle segment 3 bytes shorter", middle, reframeFirst(-3)},
	}
	refused := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(img)
			bad[c.seg] = c.damage(bad[c.seg])
			if checkRefusedOrExact(t, bad, want) {
				refused++
			}
			checkSalvageNeverWrong(t, bad, want)
		})
	}
	t.Logf("%d of %d damaged images refused", refused, len(cases))
}

// appendZeros appends 4096 zero bytes: a file extended by a crash whose
// data never reached the disk.
func appendZeros(b []byte) []byte { return append(b, make([]byte, 4096)...) }

// reframeLast changes the length prefix of the segment's last frame by d.
func reframeLast(d int) func([]byte) []byte {
	return func(b []byte) []byte {
		ents := parseSegment(b)
		return reframe(b, ents[len(ents)-1].off, d)
	}
}

// reframeFirst changes the length prefix of the segment's first frame by d.
func reframeFirst(d int) func([]byte) []byte {
	return func(b []byte) []byte { return reframe(b, 0, d) }
}

// reframe rewrites the uvarint length prefix of the frame at off as its
// length plus d, in as many bytes as before (the segment keeps its size):
// a length that would take another number of bytes is held at the
// largest or smallest one that takes as many, and one already there (a
// change that would be none) moves by d the other way.
func reframe(b []byte, off int64, d int) []byte {
	n, k := binary.Uvarint(b[off:])
	if k <= 0 {
		panic(fmt.Sprintf("no frame at offset %d", off))
	}
	lo, hi := uint64(0), uint64(1)<<(7*k)-1
	if k > 1 {
		lo = uint64(1) << (7 * (k - 1))
	}
	clamp := func(v int64) int64 { return min(max(v, int64(lo)), int64(hi)) }
	v := clamp(int64(n) + int64(d))
	if v == int64(n) {
		v = clamp(int64(n) - int64(d))
	}
	copy(b[off:], binary.AppendUvarint(nil, uint64(v)))
	return b
}

// checkRefusedOrExact opens the image: either Open refuses it (ErrCorrupt
// naming the way out, no file changed), or the drain fails with ErrCorrupt
// at the read that meets the damage, or it returns exactly the messages
// that were enqueued, each once with the payload bytes it was enqueued
// with. It reports whether the damage was refused.
func checkRefusedOrExact(t *testing.T, img, want map[string][]byte) bool {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	if q, err := queue.Open(dir, &queue.Options{}); err != nil {
		if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), "walq repair") {
			t.Fatalf("Open: %v; want ErrCorrupt naming walq repair", err)
		}
		if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
			t.Fatalf("a refused Open changed the directory (%v)", err)
		}
		return true
	} else if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := drainQueue(dir)
	if err != nil {
		// Found by the read that met it, before anything wrong came out.
		if !errors.Is(err, queue.ErrCorrupt) {
			t.Fatalf("drain: %v; want ErrCorrupt", err)
		}
		return true
	}
	seen := map[string]bool{}
	for i, tok := range d.tokens {
		w, ok := want[tok]
		if !ok || seen[tok] {
			t.Fatalf("the drain of a damaged log returned %q (enqueued: %v, twice: %v)", tok, ok, seen[tok])
		}
		if !bytes.Equal(d.payloads[i], w) {
			t.Fatalf("the drain of a damaged log returned %q with payload %q, want %q", tok, d.payloads[i], w)
		}
		seen[tok] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("the damaged log opened and drained %d messages of %d", len(seen), len(want))
	}
	return false
}

// checkSalvageNeverWrong opens the image with Salvage and drains it,
// checking every payload.
func checkSalvageNeverWrong(t *testing.T, img, want map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "s")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	o.Salvage = true
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("Open with Salvage: %v", err)
	}
	defer q.Close()
	n := drainChecked(t, q, want)
	if rep := q.Recovery(); len(rep.Log.Salvaged) == 0 && n != len(want) {
		t.Fatalf("salvage lost %d messages and reported no damage", len(want)-n)
	}
}

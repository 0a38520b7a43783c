package fuzz_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/queue"
)

// damageCase is one corruption of a directory image: the damaged file (""
// for a removed one) and what it did.
type damageCase struct {
	name   string
	file   string              // relative path of the damaged file
	damage func([]byte) []byte // nil: the file is removed
	lost   [2]uint64           // LSNs of the entries the damage touches (0, 0 when unknown)
}

// TestMidLogDamage damages sealed segments, the middle of the tail segment
// and the snapshot of a queue directory, one corruption at a time, and
// checks that the damage is never silently dropped: Open or the drain
// fails with an error that wraps queue.ErrCorrupt and names the damaged
// file, or (damage in bytes no live message needs any more) the drain
// returns exactly the model and Verify reports the damage, naming the file.
func TestMidLogDamage(t *testing.T) {
	rng, _ := testRand(t)
	img, o := damageImage(t)
	cases := segmentDamage(rng, img, false)
	cases = append(cases, snapshotDamage(img)...)
	outcomes := make(map[string]int)
	for _, c := range cases {
		outcomes[checkDamage(t, img, o, c)]++
	}
	t.Logf("SUMMARY damage: cases=%d outcomes=%v (segments %d, snapshot %s); silent losses=0",
		len(cases), outcomes, len(segmentFiles(img)), snapshotFiles(img))
}

// damageImage builds a crash image of a queue with several sealed segments,
// a snapshot, and messages live before and after it; it returns the image
// and an oracle that knows what must be in it.
func damageImage(t *testing.T) (map[string][]byte, *fuzz.Oracle) {
	dir := scratchDir(t)
	clock := newManualClock()
	q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, ManualRequeue: true, Clock: clock, SnapshotBytes: 1 << 30})
	defer q.Close()
	o := fuzz.NewOracle()
	n := 0
	round := func(enq, deq, ack int) {
		for i := 0; i < enq; i++ {
			tok := fmt.Sprintf("D%d", n)
			n++
			mustEnqueue(t, q, payload(tok, 100+n%100))
			o.Enqueued(tok)
		}
		for i := 0; i < deq; i++ {
			m, err := q.TryDequeue()
			if err != nil {
				t.Fatal(err)
			}
			tok := tokenOf(m.Payload)
			o.Delivered(tok)
			if i < ack {
				if err := m.Ack(); err != nil {
					t.Fatal(err)
				}
				o.Acked(tok)
			}
		}
	}
	round(60, 30, 25)
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	round(60, 10, 8)
	// A background compaction may be writing a snapshot: read the
	// directory once it is still, so that it holds the new one or the old.
	img, err := quietDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshotFiles(img)) != 1 || len(segmentFiles(img)) < 4 {
		t.Fatalf("image has %d snapshots and %d segments; the test needs one and at least four", len(snapshotFiles(img)), len(segmentFiles(img)))
	}
	return img, o
}

// segmentDamage lists corruptions of every entry of the sealed segments and
// of the first entries of the tail: bit flips in the frame length, the
// CRC, the header and a record, zeroed bytes, a zeroed sector; plus sealed
// segments cut short or removed. With entriesOnly, only damage confined to
// one entry.
func segmentDamage(rng *rand.Rand, img map[string][]byte, entriesOnly bool) []damageCase {
	var cs []damageCase
	segs := segmentFiles(img)
	for si, seg := range segs {
		ents := parseSegment(img[seg])
		if si == len(segs)-1 {
			ents = ents[:max(0, len(ents)-2)] // the tail: only entries that valid ones follow
		}
		for _, e := range ents {
			span := [2]uint64{e.first, e.lastLSN()}
			fl := int64(frameLen(e))
			for _, at := range []struct {
				what string
				off  int64
			}{
				{"frame length", e.off},
				{"CRC", e.off + fl + rng.Int64N(4)},
				{"first LSN", e.off + fl + 5 + rng.Int64N(8)},
				{"record", e.end - 1 - rng.Int64N(int64(len(e.recs[len(e.recs)-1])))},
			} {
				bit := rng.IntN(8)
				cs = append(cs, damageCase{fmt.Sprintf("%s: bit %d flipped at %d (%s)", seg, bit, at.off, at.what), seg,
					flipBit(at.off, bit), span})
			}
			mid := (e.off + e.end) / 2
			cs = append(cs, damageCase{fmt.Sprintf("%s: 16 bytes zeroed at %d", seg, mid), seg, zeroRange(mid, 16), span})
		}
		if entriesOnly || si == len(segs)-1 {
			continue
		}
		sec := rng.Int64N(int64(len(img[seg]))) / 512 * 512
		cs = append(cs, damageCase{fmt.Sprintf("%s: sector at %d zeroed", seg, sec), seg, zeroRange(sec, 512), [2]uint64{}})
		cs = append(cs, damageCase{fmt.Sprintf("%s: sealed segment cut short by 7 bytes", seg), seg,
			func(b []byte) []byte { return b[:len(b)-7] }, [2]uint64{}})
		cs = append(cs, damageCase{fmt.Sprintf("%s: sealed segment removed", seg), seg, nil, [2]uint64{}})
	}
	return cs
}

// frameLen is the size of an entry's uvarint frame length.
func frameLen(e entryInfo) int {
	n := e.end - e.off
	for k := 1; ; k++ {
		if n-int64(k) < 1<<(7*k) {
			return k
		}
	}
}

// snapshotDamage flips one bit in every byte of the snapshot, zeroes 16
// bytes in it, cuts it short and lengthens it.
func snapshotDamage(img map[string][]byte) []damageCase {
	var cs []damageCase
	snap := snapshotFiles(img)[0]
	n := len(img[snap])
	for off := 0; off < n; off++ {
		if raceEnabled && off > 64 && off%5 != 0 {
			continue
		}
		cs = append(cs, damageCase{fmt.Sprintf("%s: bit %d flipped at %d", snap, off%8, off), snap, flipBit(int64(off), off%8), [2]uint64{}})
	}
	return append(cs,
		damageCase{snap + ": 16 bytes zeroed in the body", snap, zeroRange(int64(n/2), 16), [2]uint64{}},
		damageCase{snap + ": cut short", snap, func(b []byte) []byte { return b[:len(b)-1] }, [2]uint64{}},
		damageCase{snap + ": a byte appended", snap, func(b []byte) []byte { return append(b, 0) }, [2]uint64{}},
	)
}

func flipBit(off int64, bit int) func([]byte) []byte {
	return func(b []byte) []byte {
		b[off] ^= 1 << bit
		return b
	}
}

func zeroRange(off, n int64) func([]byte) []byte {
	return func(b []byte) []byte {
		clear(b[off:min(off+n, int64(len(b)))])
		return b
	}
}

// damaged returns a copy of img with c applied.
func damaged(img map[string][]byte, c damageCase) map[string][]byte {
	out := make(map[string][]byte, len(img))
	for k, v := range img {
		out[k] = v
	}
	if c.damage == nil {
		delete(out, c.file)
	} else {
		out[c.file] = c.damage(slices.Clone(img[c.file]))
	}
	return out
}

// checkDamage opens and drains one damaged image without Salvage and
// returns the outcome.
func checkDamage(t *testing.T, img map[string][]byte, model *fuzz.Oracle, c damageCase) string {
	t.Helper()
	dir := writeDamaged(t, "q", img, c)
	defer os.RemoveAll(dir)
	names := []string{filepath.Base(c.file)}
	if c.damage == nil { // a removed segment: its neighbours are named
		names = neighbours(img, c.file)
	}
	d, err := drainQueue(dir)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) || !mentionsAny(err, names) {
			t.Fatalf("%s: the error must wrap queue.ErrCorrupt and name %v: %v", c.name, names, err)
		}
		if d.recovery.Duration == 0 {
			return "Open: ErrCorrupt"
		}
		return "drain: ErrCorrupt"
	}
	o := model.Clone()
	if r := o.Recovered(d.tokens); !r.OK() {
		t.Fatalf("%s: opened and drained, and lost data silently: %s", c.name, r)
	}
	if _, err := queue.Verify(writeAgain(t, img, c), nil); !errors.Is(err, queue.ErrCorrupt) || !mentionsAny(err, names) {
		t.Fatalf("%s: the damage did not matter to the drain, but Verify must report it naming %v: %v", c.name, names, err)
	}
	return "unneeded bytes: Verify ErrCorrupt"
}

// writeAgain writes the damaged image to a new directory (the drain
// changed the first one) and returns it.
func writeAgain(t *testing.T, img map[string][]byte, c damageCase) string {
	return writeDamaged(t, "v", img, c)
}

// writeDamaged writes img with c's damage to the directory name in the
// scratch directory and returns its path.
func writeDamaged(t testing.TB, name string, img map[string][]byte, c damageCase) string {
	t.Helper()
	dir := filepath.Join(scratchDir(t), name)
	if err := writeDir(dir, damaged(img, c)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// neighbours returns the base names of the segments around seg.
func neighbours(img map[string][]byte, seg string) []string {
	segs := segmentFiles(img)
	i := slices.Index(segs, seg)
	var out []string
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(segs) {
			out = append(out, filepath.Base(segs[j]))
		}
	}
	return out
}

func mentionsAny(err error, names []string) bool {
	for _, n := range names {
		if strings.Contains(err.Error(), n) {
			return true
		}
	}
	return false
}

// TestSalvageReportsExactly damages one entry at a time in a log of
// enqueue records (sealed segments and the middle of the tail) and opens
// it with Options.Salvage: the queue must open, Recovery().Log.Salvaged
// must name the file and exactly the LSNs of the damaged entry (in the
// tail: from it to the end, which salvage cuts), and the drain must return
// every message but those. Damage in the log's first entry and in the
// tail segment's first entry once failed; their regression tests are
// queue's TestSalvageFirstEntry and wal's TestTailSalvageCut. Under the
// race detector it checks every third damage case.
func TestSalvageReportsExactly(t *testing.T) {
	rng, _ := testRand(t)
	img, toks := salvageImage(t, rng)
	segs := segmentFiles(img)
	outcomes := make(map[string]int)
	cases := raceThinned(segmentDamage(rng, img, true))
	for _, c := range cases {
		tail := c.file == segs[len(segs)-1]
		if tail { // salvage cuts the tail at the damage
			ents := parseSegment(img[c.file])
			c.lost[1] = ents[len(ents)-1].lastLSN()
		}
		// The last entry of a sealed segment under an empty tail: no record
		// after it tells its last LSN, so a salvage reports up to the most its
		// bytes can hold (wal/doc.go, Damage under an empty tail).
		bounded := false
		if n := len(segs); !tail && n >= 2 && c.file == segs[n-2] && len(parseSegment(img[segs[n-1]])) == 0 {
			ents := parseSegment(img[c.file])
			bounded = c.lost[1] == ents[len(ents)-1].lastLSN()
		}
		outcomes["exact"]++
		checkSalvage(t, img, c, toks, bounded)
	}
	t.Logf("SUMMARY salvage: cases=%d outcomes=%v", len(cases), outcomes)
}

// salvageImage is a crash image of a log of 120 enqueues in 4 KiB
// segments; token i is at LSN i+1.
func salvageImage(t *testing.T, rng *rand.Rand) (map[string][]byte, []string) {
	dir := scratchDir(t)
	q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096})
	defer q.Close()
	var toks []string
	for i := 0; i < 120; i++ {
		tok := fmt.Sprintf("V%d", i)
		mustEnqueue(t, q, payload(tok, 60+rng.IntN(100)))
		toks = append(toks, tok)
	}
	img, err := readDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return img, toks
}

// openSalvage writes a damaged image and opens it with Salvage.
func openSalvage(t *testing.T, img map[string][]byte, c damageCase) (string, queue.Recovery, error) {
	t.Helper()
	dir := writeDamaged(t, "q", img, c)
	o := drainOptions()
	o.Salvage = true
	q, err := queue.Open(dir, &o)
	if err != nil {
		return dir, queue.Recovery{}, err
	}
	rec := q.Recovery()
	return dir, rec, q.Close()
}

// checkSalvage checks that Salvage opens the damaged image, reports exactly
// the LSNs of c (from c.lost[0] to c.lost[1] or, when bounded, past it to
// the most its bytes can hold), and that the drain returns everything else.
func checkSalvage(t *testing.T, img map[string][]byte, c damageCase, toks []string, bounded bool) {
	t.Helper()
	dir, rec, err := openSalvage(t, img, c)
	defer os.RemoveAll(dir)
	if err != nil {
		t.Fatalf("%s: Open with Salvage: %v", c.name, err)
	}
	s := rec.Log.Salvaged
	exact := len(s) == 1 && s[0].FirstLSN == c.lost[0] && filepath.Base(s[0].Segment) == filepath.Base(c.file)
	if bounded {
		exact = exact && (s[0].LastLSN == c.lost[1] ||
			s[0].LastLSN > c.lost[1] && strings.Contains(s[0].Reason, "no record follows to tell its last LSN"))
	} else {
		exact = exact && s[0].LastLSN == c.lost[1]
	}
	if !exact {
		t.Fatalf("%s: Salvaged = %+v, want one region in %s losing LSNs %d-%d (bounded: %v)", c.name, s, c.file, c.lost[0], c.lost[1], bounded)
	}
	drainAllBut(t, dir, c, toks)
}

// drainAllBut drains dir and checks that it returns every token but those
// at the LSNs c lost. Enqueue LSNs are 1, 2, …, so token i is LSN i+1.
func drainAllBut(t *testing.T, dir string, c damageCase, toks []string) {
	t.Helper()
	d, err := drainQueue(dir)
	if err != nil {
		t.Fatalf("%s: drain: %v", c.name, err)
	}
	var want []string
	for i, tok := range toks {
		if lsn := uint64(i + 1); lsn < c.lost[0] || lsn > c.lost[1] {
			want = append(want, tok)
		}
	}
	if !slices.Equal(d.tokens, want) {
		t.Fatalf("%s: drained %d messages, want the %d not in LSNs %d-%d", c.name, len(d.tokens), len(want), c.lost[0], c.lost[1])
	}
}

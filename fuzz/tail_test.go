package fuzz_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/queue"
)

// TestTailEveryOffset damages the end of the log at every byte of its last
// entries and checks, through the queue and the oracle, that recovery keeps
// exactly the messages of the whole entries before the damage (reporting
// the cut), and that the repaired log takes ten more messages that survive
// a reopen after them, in order. Damage:
//
//   - cut: the file ends at the offset;
//   - cut, then zeros to the end of the 512-byte sector, or then garbage;
//   - zeros from a sector boundary to the end of the file (a sector that
//     never made it);
//   - zeros or garbage appended after the last entry (nothing lost).
//
// Two logs: one whose last entry is a single record, one whose last entry
// is (almost always: see byEntry) a batch of three (an entry is a commit
// group: all or nothing). The two run side by side: each case opens,
// writes and drains a queue of its own, one at a time, so that one log
// keeps one core busy.
func TestTailEveryOffset(t *testing.T) {
	for _, lastBatch := range []int{1, 3} {
		t.Run(fmt.Sprintf("last entry of %d", lastBatch), func(t *testing.T) {
			t.Parallel()
			rng, _ := testRand(t)
			img, toks := tailLog(t, rng, lastBatch)
			seg := segmentFiles(img)[0]
			ents := parseSegment(img[seg])
			// The live tail reaches past its entries with zeros written
			// ahead of it; a sector of them is enough to stand for them,
			// and keeps each case's copy of the image small.
			img[seg] = append(img[seg][:ents[len(ents)-1].end:ents[len(ents)-1].end], make([]byte, 4096)...)
			toks = byEntry(t, toks, ents)
			var res fuzz.Result
			n := 0
			for _, c := range tailCases(rng, img[seg], ents) {
				r := checkTail(t, img, seg, c, ents, toks)
				res, n = res.Add(r), n+1
			}
			t.Logf("SUMMARY tail (last entry of %d records): cases=%d %s", lastBatch, n, res)
		})
	}
}

// byEntry regroups the operations' tokens by the log entries that hold
// them. Each single enqueue is one entry. An EnqueueBatch is usually one
// too, but the committer may take the first of its records before the
// rest are appended (rarely, by timing): the batch is then two entries,
// and a cut between them keeps the first (documented: an interrupted batch
// may leave a prefix).
func byEntry(t *testing.T, toks [][]string, ents []entryInfo) [][]string {
	t.Helper()
	flat := slices.Concat(toks...)
	out := make([][]string, 0, len(ents))
	for _, e := range ents {
		if e.count > len(flat) {
			t.Fatalf("entries hold more records than the %d operations", len(toks))
		}
		out, flat = append(out, flat[:e.count]), flat[e.count:]
	}
	if len(flat) > 0 || len(out) < len(toks) {
		t.Fatalf("%d entries for %d operations, %d records left over", len(ents), len(toks), len(flat))
	}
	return out
}

// tailCase is one damaged tail: the new file and how many whole entries
// must survive.
type tailCase struct {
	name string
	data []byte
	keep int // entries kept
}

// tailLog builds a queue log of single-message entries ending with an
// entry of lastBatch messages, and returns the directory image and each
// entry's tokens.
func tailLog(t *testing.T, rng *rand.Rand, lastBatch int) (map[string][]byte, [][]string) {
	dir := scratchDir(t)
	q := mustOpen(t, dir, nil)
	defer q.Close()
	var toks [][]string
	for i := 0; i < 12; i++ {
		tok := fmt.Sprintf("T%d", i)
		mustEnqueue(t, q, payload(tok, 50+rng.IntN(150)))
		toks = append(toks, []string{tok})
	}
	var items []queue.Item
	var last []string
	for j := 0; j < lastBatch; j++ {
		tok := fmt.Sprintf("T12.%d", j)
		items = append(items, queue.Item{Payload: payload(tok, 50+rng.IntN(150))})
		last = append(last, tok)
	}
	if _, err := q.EnqueueBatch(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	img, err := readDir(dir) // a crash image: everything written
	if err != nil {
		t.Fatal(err)
	}
	return img, append(toks, last)
}

// tailCases lists the damage for every offset of the last three entries
// and of the zeros after them. Under the race detector (fuzz/ci.sh runs
// every offset without it) it takes every third offset of the earlier two
// entries; every offset of the last entry and of the first 512 zeros
// after it; and beyond those, every seventh offset and the three around
// each sector boundary. So every cut within the last entry, every count
// of zeros below a sector before garbage, and every offset within a
// sector (7 and 512 are coprime) still get their cases.
func tailCases(rng *rand.Rand, b []byte, ents []entryInfo) []tailCase {
	var cs []tailCase
	keepBefore := func(off int64) int {
		n := 0
		for _, e := range ents {
			if e.end <= off {
				n++
			}
		}
		return n
	}
	last := ents[len(ents)-1]
	for off := ents[len(ents)-3].off; off < int64(len(b)); off++ {
		if raceEnabled && off < last.off && off%3 != 0 {
			continue
		}
		if raceEnabled && off >= last.end+512 && off%7 != 0 && (off+1)%512 > 2 {
			continue
		}
		cut, k := b[:off:off], keepBefore(off)
		cs = append(cs, tailCase{fmt.Sprintf("cut at %d", off), cut, k})
		if off < last.off {
			continue
		}
		pad := 512 - int(off)%512
		cs = append(cs, tailCase{fmt.Sprintf("cut at %d, zeros to the sector end", off), append(cut, make([]byte, pad)...), k})
		// Garbage starting with the byte that was cut would, once in 256
		// draws, make a cut that removed only the entry's last byte whole
		// again: the entry would then rightly be recovered.
		g := garbage(rng, 1+rng.IntN(700))
		if g[0] == b[off] {
			g[0] ^= 0xff
		}
		cs = append(cs, tailCase{fmt.Sprintf("cut at %d, garbage", off), append(cut, g...), k})
	}
	for sec := ents[len(ents)-3].off / 512 * 512; sec < int64(len(b)); sec += 512 {
		z := slices.Clone(b)
		clear(z[sec:])
		cs = append(cs, tailCase{fmt.Sprintf("zeros from sector %d to the end", sec), z, keepBefore(sec)})
	}
	for _, n := range []int{1, 2, 17, 511, 512, 4096} {
		cs = append(cs, tailCase{fmt.Sprintf("%d zeros appended", n), append(slices.Clone(b), make([]byte, n)...), len(ents)})
	}
	for i := 0; i < 20; i++ {
		cs = append(cs, tailCase{"garbage appended", append(slices.Clone(b), garbage(rng, 1+rng.IntN(2000))...), len(ents)})
	}
	return cs
}

// garbage returns n random bytes.
func garbage(rng *rand.Rand, n int) []byte {
	g := make([]byte, n)
	for i := range g {
		g[i] = byte(rng.Uint32())
	}
	return g
}

// checkTail opens the damaged log, checks the repair report, adds ten
// messages, reopens and drains: the whole-entry prefix and the ten, in
// order.
func checkTail(t *testing.T, img map[string][]byte, seg string, c tailCase, ents []entryInfo, toks [][]string) fuzz.Result {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	files := map[string][]byte{seg: c.data}
	if err := writeDir(dir, files); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, nil)
	if err != nil {
		t.Fatalf("%s: Open: %v", c.name, err)
	}
	// Whole: the kept entries end the file, or zeros alone follow them
	// (zeros ahead of the tail: a clean end).
	end := ents[len(ents)-1].end
	if c.keep < len(ents) {
		end = ents[c.keep].off
	}
	whole := int64(len(c.data)) >= end && !slices.ContainsFunc(c.data[end:], func(b byte) bool { return b != 0 })
	if torn := q.Recovery().Log.Torn; (torn == nil) != whole {
		t.Fatalf("%s: Recovery().Log.Torn = %v, but the file ends with a whole entry: %v", c.name, torn, whole)
	}
	var want []string
	o := fuzz.NewOracle()
	for _, ts := range toks[:c.keep] {
		for _, tok := range ts {
			want = append(want, tok)
			o.Enqueued(tok)
		}
	}
	for i := 0; i < 10; i++ {
		tok := fmt.Sprintf("N%d", i)
		mustEnqueue(t, q, payload(tok, 10))
		want = append(want, tok)
		o.Enqueued(tok)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("%s: Close: %v", c.name, err)
	}
	d, err := drainQueue(dir)
	if err != nil {
		t.Fatalf("%s: drain: %v", c.name, err)
	}
	r := o.Recovered(d.tokens)
	if !r.OK() || !slices.Equal(d.tokens, want) {
		t.Fatalf("%s: drained %v, want %v: %s", c.name, d.tokens, want, r)
	}
	return o.Result()
}

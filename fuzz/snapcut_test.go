package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSnapshotThenLogCut: an ack queue with producer-given ids under a
// dedup window, delays, dead letters and leases is snapshotted, written
// to after the snapshot, and its log then cut at every entry boundary and
// in the middle of every entry after the snapshot (a crash that lost what
// was not yet synced). A plain open must take every cut as a torn tail:
// it delivers every message whose enqueue record survived and was not
// acked by a record that survived, each with the bytes enqueued, never
// one whose ack survived, and a surviving ack of a producer-given id
// still refuses that id. With -short or -race, at the entries whose first
// LSN is a multiple of three (fuzz/ci.sh runs every cut without the
// detector).
func TestSnapshotThenLogCut(t *testing.T) {
	rng, _ := testRand(t)
	h := snapHistory(t, rng, false)
	segs := segmentFiles(h.img)
	cuts := 0
	for si, seg := range segs {
		for _, e := range parseSegment(h.img[seg]) {
			if e.first <= h.snapLSN || ((testing.Short() || raceEnabled) && e.first%3 != 0) {
				continue
			}
			for _, at := range []struct {
				name string
				size int64
				keep uint64 // the last LSN the cut keeps
			}{
				{"before the entry", e.off, e.first - 1},
				{"mid-entry", (e.off + e.end) / 2, e.first - 1},
			} {
				img := maps(h.img)
				img[seg] = img[seg][:at.size]
				for _, later := range segs[si+1:] {
					delete(img, later)
				}
				name := fmt.Sprintf("%s %s of LSN %d", seg, at.name, e.first)
				h.checkCut(t, name, img, at.keep)
				cuts++
			}
		}
	}
	t.Logf("%d cuts after snapshot LSN %d", cuts, h.snapLSN)
}

// snapHist is a history of an ack queue with one snapshot: its crash
// image and what each message went through, by token.
type snapHist struct {
	img      map[string][]byte
	snapLSN  uint64
	payloads map[string][]byte // by token
	enqLSN   map[string]uint64 // LSN of the enqueue record
	ackLSN   map[string]uint64 // LSN of the ack record; none when not acked
	ids      map[string]string // producer-given id, when one was given
}

// snapHistory runs the history: messages enqueued (some delayed, some
// with ids), delivered and acked, dead-lettered, nacked or kept leased; a
// Compact; then more of the same. With twice, a second Compact runs last,
// and the image is taken between its rename and the removal of the older
// snapshot, so that it holds both.
func snapHistory(t *testing.T, rng *rand.Rand, twice bool) *snapHist {
	t.Helper()
	dir := scratchDir(t)
	h := &snapHist{payloads: map[string][]byte{}, enqLSN: map[string]uint64{}, ackLSN: map[string]uint64{},
		ids: map[string]string{}}
	o := queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true, AckTimeout: time.Hour,
		DedupWindow: 24 * time.Hour, MaxDeliveries: 5}
	testhook.SetManualCompaction(&o)
	var held map[string][]byte
	armed := false // the second Compact runs
	testhook.SetSnapshotStep(&o, func(step string) {
		if step == "dir-synced" && armed && held == nil {
			var err error
			if held, err = readDir(dir); err != nil {
				t.Error(err)
			}
		}
	})
	q := mustOpen(t, dir, &o)
	defer q.Close()
	n := 0
	round := func(count int) {
		var leased []*queue.Message
		for range count {
			switch k := rng.IntN(10); {
			case k < 5:
				h.enqueue(t, q, rng, n)
				n++
			case k < 8:
				if m, err := q.TryDequeue(); err == nil {
					leased = append(leased, m)
				}
			case len(leased) > 0:
				j := rng.IntN(len(leased))
				h.settle(t, q, rng, leased[j])
				leased = slices.Delete(leased, j, j+1)
			}
		}
	}
	round(120)
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	round(80)
	if twice {
		armed = true
		if err := q.Compact(); err != nil {
			t.Fatal(err)
		}
		h.img = held
		if len(snapshotFiles(h.img)) != 2 {
			t.Fatalf("the image holds snapshots %v; want two", snapshotFiles(h.img))
		}
	} else {
		img, err := quietDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		h.img = img
	}
	snaps := snapshotFiles(h.img)
	if _, err := fmt.Sscanf(snaps[len(snaps)-1], "snapshot-%d.snap", &h.snapLSN); err != nil {
		t.Fatal(err)
	}
	return h
}

// enqueue enqueues the message of number i, noting its record's LSN.
func (h *snapHist) enqueue(t *testing.T, q *queue.Queue, rng *rand.Rand, i int) {
	tok := fmt.Sprintf("P%d", i)
	p := payload(tok, 30+rng.IntN(150))
	var opts []queue.EnqueueOption
	if rng.IntN(4) == 0 {
		opts = append(opts, queue.WithDelay(time.Hour))
	}
	if rng.IntN(2) == 0 {
		h.ids[tok] = "id-" + tok
		opts = append(opts, queue.WithID(h.ids[tok]))
	}
	mustEnqueue(t, q, p, opts...)
	h.payloads[tok], h.enqLSN[tok] = p, q.Stats().LastLSN
}

// settle acks, dead-letters or nacks m, noting an ack's LSN.
func (h *snapHist) settle(t *testing.T, q *queue.Queue, rng *rand.Rand, m *queue.Message) {
	var err error
	switch rng.IntN(3) {
	case 0:
		if err = m.Ack(); err == nil {
			h.ackLSN[tokenOf(m.Payload)] = q.Stats().LastLSN
		}
	case 1:
		err = m.DeadLetter("poison")
	default:
		err = m.Nack(time.Duration(rng.IntN(2)) * time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// checkCut opens img, whose log keeps the records up to LSN keep, plainly
// and checks it against the history (see TestSnapshotThenLogCut).
func (h *snapHist) checkCut(t *testing.T, name string, img map[string][]byte, keep uint64) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	h.checkIDs(t, name, img, keep)
	d, err := drainQueue(dir)
	if err != nil {
		t.Fatalf("%s: open and drain: %v", name, err)
	}
	got := map[string]int{}
	for i, tok := range d.tokens {
		got[tok]++
		if !bytes.Equal(d.payloads[i], h.payloads[tok]) {
			t.Fatalf("%s: message %s delivered with %d wrong bytes %q", name, tok, len(d.payloads[i]), d.payloads[i][:min(20, len(d.payloads[i]))])
		}
	}
	for tok, lsn := range h.enqLSN {
		acked := h.ackLSN[tok] != 0 && h.ackLSN[tok] <= keep
		switch {
		case got[tok] > 1:
			t.Errorf("%s: message %s delivered %d times", name, tok, got[tok])
		case acked && got[tok] > 0:
			t.Errorf("%s: message %s, acked at LSN %d, came back", name, tok, h.ackLSN[tok])
		case !acked && lsn <= keep && got[tok] == 0:
			t.Errorf("%s: message %s, enqueued at LSN %d, lost", name, tok, lsn)
		}
	}
}

// checkIDs checks that every producer-given id whose ack survived, within
// the window, still refuses its id.
func (h *snapHist) checkIDs(t *testing.T, name string, img map[string][]byte, keep uint64) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "ids")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	o.Clock, o.DedupWindow = nil, 24*time.Hour
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("%s: reopen: %v", name, err)
	}
	defer q.Close()
	for tok, id := range h.ids {
		if a := h.ackLSN[tok]; a == 0 || a > keep {
			continue
		}
		if _, err := q.Enqueue(context.Background(), []byte("again"), queue.WithID(id)); !errors.Is(err, queue.ErrDuplicate) {
			t.Errorf("%s: id %s, acked at LSN %d within the window, enqueued again: %v", name, id, h.ackLSN[tok], err)
		}
	}
}

// TestDamageAroundSnapshot flips a byte in each entry of the log around
// the snapshot's LSN, and in the snapshot's header and body, and leaves
// the log ending before the snapshot, with one snapshot or two (a crash
// before the older was removed, the newer damaged); then a plain open either delivers
// exactly the history (every message with its bytes, none acked) or
// refuses with ErrCorrupt naming the way out, and a repair then succeeds
// and delivers only messages of the history, each once with its bytes;
// after damage to the snapshot alone, which the log after the older
// snapshot (or from its first record) still holds, exactly the history,
// and with two snapshots the newer damaged, every acked id the older
// one keeps still refuses its id.
func TestDamageAroundSnapshot(t *testing.T) {
	rng, _ := testRand(t)
	for _, twice := range []bool{false, true} {
		h := snapHistory(t, rng, twice)
		for _, c := range h.damageNear() {
			snapOnly := strings.HasPrefix(c.name, "snapshot-")
			h.checkDamaged(t, fmt.Sprintf("two snapshots %v, %s", twice, c.name), c.img, snapOnly, twice && snapOnly)
		}
	}
}

// damagedImage is a damaged copy of a history's image.
type damagedImage struct {
	name string
	img  map[string][]byte
}

// damageNear lists the damage of TestDamageAroundSnapshot: a bit flipped
// in each entry that holds an LSN from snapLSN-3 to snapLSN+3, in the
// newest snapshot's header and body, and the log ending before each entry
// that holds an LSN up to the snapshot's (that segment cut there, every
// later one removed).
func (h *snapHist) damageNear() []damagedImage {
	var out []damagedImage
	segs := segmentFiles(h.img)
	for si, seg := range segs {
		for _, e := range parseSegment(h.img[seg]) {
			if e.lastLSN()+3 < h.snapLSN || e.first > h.snapLSN+3 {
				continue
			}
			c := damageCase{file: seg, damage: flipBit(e.end-2, 5)}
			out = append(out, damagedImage{fmt.Sprintf("%s: bit flipped in the entry of LSN %d+%d", seg, e.first, e.count), damaged(h.img, c)})
			if e.first > h.snapLSN {
				continue
			}
			img := maps(h.img)
			img[seg] = img[seg][:e.off]
			for _, later := range segs[si+1:] {
				delete(img, later)
			}
			out = append(out, damagedImage{fmt.Sprintf("%s: the log ends before LSN %d", seg, e.first), img})
		}
	}
	snaps := snapshotFiles(h.img)
	snap := snaps[len(snaps)-1]
	n := int64(len(h.img[snap]))
	for _, off := range []int64{0, 8, 10, 14, 22, 29, n / 2, n - 1} {
		c := damageCase{file: snap, damage: flipBit(off, 2)}
		out = append(out, damagedImage{fmt.Sprintf("%s: bit flipped at %d", snap, off), damaged(h.img, c)})
	}
	return out
}

// checkDamaged checks one damaged image (see TestDamageAroundSnapshot).
func (h *snapHist) checkDamaged(t *testing.T, name string, img map[string][]byte, snapOnly, ids bool) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	d, err := drainQueue(dir)
	if err == nil {
		h.checkDrained(t, name+" (opened)", d, true)
		return
	}
	if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), "walq repair") {
		t.Fatalf("%s: open: %v; want ErrCorrupt naming walq repair", name, err)
	}
	if _, err := queue.Repair(dir, nil); err != nil {
		t.Fatalf("%s: repair: %v", name, err)
	}
	if ids {
		repaired, err := readDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		h.checkIDs(t, name+" (repaired)", repaired, math.MaxUint64)
	}
	d, err = drainQueue(dir)
	if err != nil {
		t.Fatalf("%s: open after repair: %v", name, err)
	}
	h.checkDrained(t, name+" (repaired)", d, snapOnly)
}

// checkDrained checks a drain against the history: every payload is its
// message's, no message comes twice; with exact, every message not acked
// comes and none acked.
func (h *snapHist) checkDrained(t *testing.T, name string, d drained, exact bool) {
	t.Helper()
	got := map[string]int{}
	for i, tok := range d.tokens {
		got[tok]++
		if p, ok := h.payloads[tok]; !ok || !bytes.Equal(d.payloads[i], p) {
			t.Fatalf("%s: message %q delivered with %d wrong bytes", name, tok, len(d.payloads[i]))
		}
		if got[tok] > 1 {
			t.Errorf("%s: message %s delivered twice", name, tok)
		}
	}
	if !exact {
		return
	}
	for tok := range h.enqLSN {
		if acked := h.ackLSN[tok] != 0; acked != (got[tok] == 0) {
			t.Errorf("%s: message %s acked %v, delivered %d times", name, tok, acked, got[tok])
		}
	}
}

package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// TestSalvagePreviewMatchesTheSalvage: random histories of a queue, then
// random damage to whole log entries (a flipped byte in one to three of
// them, sometimes a torn tail, a lost first segment, a damaged or removed
// snapshot, or a log cut before the snapshot's LSN). A read-only
// salvaging open (ReadOnly and Salvage), which previews the salvage, must
// open where the salvage opens after damage to the snapshot, and show
// what the salvage then gives: the same Recovery.Dropped, LostBefore,
// SnapshotLSN, SnapshotLost, Replayed, Skipped, Requeued and DeadOnOpen
// (the leases of the crashed process the salvage ends), the same counts, every
// message in the same state with the same payload, and the same dead
// letters with their reasons.
// WALQ_PREVIEW_SEEDS sets how many histories run, WALQ_PREVIEW_FROM the
// seed of the first (1 by default).
func TestSalvagePreviewMatchesTheSalvage(t *testing.T) {
	seeds := scaled(200, 4)
	if testing.Short() {
		seeds = 40
	}
	seeds = envInt(t, "WALQ_PREVIEW_SEEDS", seeds)
	from := int64(envInt(t, "WALQ_PREVIEW_FROM", 1))
	compared, snaps := 0, 0
	for _, h := range damagedHistories(t, from, seeds) {
		if ran, snap := previewAgainstSalvage(t, h, false); ran {
			compared++
			if snap {
				snaps++
			}
		}
	}
	t.Logf("compared %d of %d damaged histories, %d with a damaged or removed snapshot (the rest: too short to damage, or not both open)",
		compared, seeds, snaps)
}

// TestSalvagePreviewAfterLostFront: histories whose damage took the log's
// first segment, which the snapshot needed, and no region of what is left
// (Recovery.LostBefore, no Log.Salvaged): the preview must count the
// ready messages as the salvage recounts them, and report the same
// LostBefore.
func TestSalvagePreviewAfterLostFront(t *testing.T) {
	for _, seed := range []int64{649, 852, 920, 964, 1416} {
		previewAgainstSalvage(t, damagedHistories(t, seed, 1)[0], false)
	}
}

// TestSalvagePreviewOpensWhereTheSalvageOpens: histories whose damage took
// a lease record, so that a later record of the message no longer
// applies: the salvage skips it (Recovery.Skipped) and opens, and so must
// the preview, showing what the salvage gives.
func TestSalvagePreviewOpensWhereTheSalvageOpens(t *testing.T) {
	for _, seed := range []int64{2, 4, 6} {
		if ran, _ := previewAgainstSalvage(t, damagedHistories(t, seed, 1)[0], true); !ran {
			t.Errorf("seed %d: not compared", seed)
		}
	}
}

// previewAgainstSalvage opens one copy of a damaged history read-only
// salvaging and another salvaging, and fails t where they differ; with
// opens set, or after damage to the snapshot, also where one opens and the
// other does not. It reports whether it compared two open queues, and
// whether the damage took the snapshot.
func previewAgainstSalvage(t *testing.T, h damagedRun, opens bool) (bool, bool) {
	t.Helper()
	seed, img, what := h.seed, h.img, h.what
	if img == nil {
		return false, false
	}
	qr, qw, rerr, werr := openBoth(t, img, drainOptions())
	if qr != nil {
		defer qr.Close()
	}
	if qw != nil {
		defer qw.Close()
	}
	if rerr != nil || werr != nil {
		if (opens || snapshotHarmed(what)) && (rerr == nil) != (werr == nil) {
			t.Errorf("seed %d, damage %v: the preview opens with %v, the salvage with %v", seed, what, rerr, werr)
		}
		return false, false
	}
	if got, want := openedView(t, qr), openedView(t, qw); got != want {
		t.Errorf("seed %d, damage %v:\npreview:\n%s\nsalvage:\n%s", seed, what, got, want)
	}
	return true, snapshotHarmed(what)
}

// openBoth writes img to two directories and opens one read-only
// salvaging (the preview) and the other salvaging, with o otherwise.
func openBoth(t *testing.T, img map[string][]byte, o queue.Options) (qr, qw *queue.Queue, rerr, werr error) {
	t.Helper()
	base := scratchDir(t)
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{ro, rw} {
		if err := writeDir(d, img); err != nil {
			t.Fatal(err)
		}
	}
	o.Salvage, o.ReadOnly = true, true
	qr, rerr = queue.Open(ro, &o)
	o.ReadOnly = false
	qw, werr = queue.Open(rw, &o)
	return qr, qw, rerr, werr
}

// snapshotHarmed reports whether what lists damage to the snapshot.
func snapshotHarmed(what []string) bool {
	return slices.ContainsFunc(what, func(w string) bool { return strings.HasPrefix(w, "snapshot ") })
}

// A damagedRun is the damaged files of the random history of seed
// (damagedHistories), nil when its log was too short to damage, and what
// the damage was.
type damagedRun struct {
	seed int64
	img  map[string][]byte
	what []string
}

// historyBatch is how many histories damagedHistories keeps open while
// their directories settle.
const historyBatch = 20

// damagedHistories returns the damaged histories of the seeds from, ...,
// from+n-1, each from its own generator seeded with its seed. A history
// takes milliseconds to run and its directory 300ms to settle (quietDir),
// so they run historyBatch at a time, each queue left open, and their
// directories settle together.
func damagedHistories(t *testing.T, from int64, n int) []damagedRun {
	out := make([]damagedRun, 0, n)
	for len(out) < n {
		var (
			rngs []*rand.Rand
			dirs []string
			qs   []*queue.Queue
		)
		for seed := from + int64(len(out)); len(rngs) < historyBatch && seed < from+int64(n); seed++ {
			rng := rand.New(rand.NewSource(seed))
			dir, q := randomHistory(t, rng)
			rngs, dirs, qs = append(rngs, rng), append(dirs, dir), append(qs, q)
		}
		imgs, err := quietDirs(dirs)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range qs {
			if err := q.Close(); err != nil {
				t.Fatalf("closing the history of seed %d: %v", from+int64(len(out)), err)
			}
			img, what := damageAtRandom(rngs[i], imgs[i])
			out = append(out, damagedRun{seed: from + int64(len(out)), img: img, what: what})
		}
	}
	return out
}

// randomHistory runs a random history of enqueues (some delayed, some
// with ids), deliveries, acks, dead-letters, nacks and compactions in a
// new directory, and returns the directory and the queue, still open: its
// files, read once they settle, are a crash image (Close would write a
// snapshot).
func randomHistory(t *testing.T, rng *rand.Rand) (string, *queue.Queue) {
	dir := scratchDir(t)
	compacts := rng.Intn(2) == 0
	q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, AckTimeout: time.Hour, ManualRequeue: true})
	// Closed when the test ends whatever stops the caller first; after
	// the caller's own Close, the second says ErrClosed.
	t.Cleanup(func() {
		if err := q.Close(); err != nil && !errors.Is(err, queue.ErrClosed) {
			t.Errorf("closing the history in %s: %v", dir, err)
		}
	})
	var held []*queue.Message
	n := 0
	for range 60 {
		if compacts && rng.Intn(15) == 0 {
			if err := q.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		switch k := rng.Intn(10); {
		case k < 5:
			n++
			var opts []queue.EnqueueOption
			if rng.Intn(4) == 0 {
				opts = append(opts, queue.WithDelay(time.Hour))
			}
			if rng.Intn(2) == 0 {
				opts = append(opts, queue.WithID(fmt.Sprintf("id%d", n)))
			}
			mustEnqueue(t, q, payload(fmt.Sprintf("T%d", n), 20+rng.Intn(200)), opts...)
		case k < 8:
			if m, err := q.TryDequeue(); err == nil {
				held = append(held, m)
			}
		case len(held) > 0:
			j := rng.Intn(len(held))
			m := held[j]
			held = slices.Delete(held, j, j+1)
			var err error
			switch rng.Intn(3) {
			case 0:
				err = m.Ack()
			case 1:
				err = m.DeadLetter("poison")
			default:
				err = m.Nack(time.Duration(rng.Intn(2)) * time.Hour)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir, q
}

// damageAtRandom damages img at random (see damagedHistory).
func damageAtRandom(rng *rand.Rand, img map[string][]byte) (map[string][]byte, []string) {
	segs := segmentFiles(img)
	type entry struct {
		seg   string
		end   int64
		first uint64
		count int
	}
	var es []entry
	for _, s := range segs {
		for _, e := range parseSegment(img[s]) {
			es = append(es, entry{s, e.end, e.first, e.count})
		}
	}
	if len(es) < 4 {
		return nil, nil
	}
	var what []string
	for k := 1 + rng.Intn(3); k > 0; k-- {
		e := es[1+rng.Intn(len(es)-2)]
		img = damaged(img, damageCase{file: e.seg, damage: flipBit(e.end-2, 1)})
		what = append(what, fmt.Sprintf("entry of LSN %d+%d", e.first, e.count))
	}
	if rng.Intn(3) == 0 {
		last := es[len(es)-1]
		b := img[last.seg]
		img[last.seg] = b[:len(b)-3]
		what = append(what, "torn tail")
	}
	if rng.Intn(4) == 0 && len(segs) > 2 {
		delete(img, segs[0])
		what = append(what, "first segment removed")
	}
	if rng.Intn(5) == 0 {
		if snaps := snapshotFiles(img); len(snaps) > 0 {
			f := snaps[len(snaps)-1]
			c := snapshotHarm(rng, f, len(img[f]))
			img = damaged(img, c)
			what = append(what, c.name)
		}
	}
	if rng.Intn(8) == 0 {
		if cut, ok := cutBeforeSnapshot(img); ok {
			img = cut
			what = append(what, "log cut before the snapshot's LSN")
		}
	}
	return img, what
}

// cutBeforeSnapshot returns img with its log cut at the start of the
// entry that holds the newest snapshot's LSN, and every later segment
// removed: a log that ends before the snapshot (a disk that lost synced
// writes). It reports false when img has no snapshot, or the entry is not
// found before damage.
func cutBeforeSnapshot(img map[string][]byte) (map[string][]byte, bool) {
	snaps := snapshotFiles(img)
	if len(snaps) == 0 {
		return nil, false
	}
	var lsn uint64
	if _, err := fmt.Sscanf(snaps[len(snaps)-1], "snapshot-%d.snap", &lsn); err != nil || lsn == 0 {
		return nil, false
	}
	segs := segmentFiles(img)
	for i, s := range segs {
		for _, e := range parseSegment(img[s]) {
			if e.lastLSN() < lsn {
				continue
			}
			out := maps(img)
			out[s] = out[s][:e.off]
			for _, later := range segs[i+1:] {
				delete(out, later)
			}
			return out, true
		}
	}
	return nil, false
}

// snapshotHarm returns one of the kinds of damage a salvage sets a
// snapshot aside for, at random, to the snapshot file f of n bytes: a bit
// flipped in its header (magic, version, checksum, LSN, body length) or in
// its checksummed body, bytes zeroed, the file cut short, lengthened or
// emptied; or the file removed, which a salvage replays the log without.
func snapshotHarm(rng *rand.Rand, f string, n int) damageCase {
	name := func(s string) string { return "snapshot " + f + ": " + s }
	switch k := rng.Intn(8); {
	case k < 2:
		off := rng.Intn(min(n, 29))
		return damageCase{name: name(fmt.Sprintf("header bit flipped at %d", off)), file: f, damage: flipBit(int64(off), rng.Intn(8))}
	case k < 4 && n > 29:
		off := 29 + rng.Intn(n-29)
		return damageCase{name: name(fmt.Sprintf("body bit flipped at %d", off)), file: f, damage: flipBit(int64(off), rng.Intn(8))}
	case k == 4:
		return damageCase{name: name("16 bytes zeroed"), file: f, damage: zeroRange(int64(rng.Intn(n)), 16)}
	case k == 5:
		cut := rng.Intn(n)
		return damageCase{name: name(fmt.Sprintf("cut to %d bytes", cut)), file: f, damage: func(b []byte) []byte { return b[:cut] }}
	case k == 6:
		return damageCase{name: name("a byte appended"), file: f, damage: func(b []byte) []byte { return append(b, 0) }}
	}
	return damageCase{name: name("removed"), file: f}
}

// openedView renders what a user of q sees after a salvaging open: the
// counts, the dead letters, Recovery.Dropped, LostBefore, Requeued and
// DeadOnOpen, and every
// message's state, in flight counted as ready
// (TestSalvagePreviewEndsLeasesAsTheSalvage compares them apart).
func openedView(t *testing.T, q *queue.Queue) string {
	t.Helper()
	s := q.Stats()
	v := view{Ready: s.Ready + s.InFlight, Delayed: s.Delayed, Dead: s.Dead, Acked: s.Acked, DeadLettered: s.DeadLettered}
	dl, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dl {
		v.DeadLetters += tokenOf(d.Payload) + ":" + d.Reason + " "
	}
	rec := q.Recovery()
	v.Dropped = fmt.Sprint(rec.Dropped)
	v.Replay = fmt.Sprintf("snapshot %d lost %s@%d replayed %d skipped %d requeued %d dead-on-open %d", rec.SnapshotLSN,
		filepath.Base(rec.SnapshotLost.Path), rec.SnapshotLost.LSN, rec.Replayed, rec.Skipped, rec.Requeued, rec.DeadOnOpen)
	var lines []string
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		ms, err := q.Browse(st, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			shown := st
			if shown == queue.StateInFlight {
				shown = queue.StateReady
			}
			full, err := q.Peek(m.Seq)
			if err != nil {
				t.Fatalf("peek %d: %v", m.Seq, err)
			}
			lines = append(lines, fmt.Sprintf("seq=%04d %v id=%s reason=%q payload=%s/%d", m.Seq, shown, m.ID, m.Reason,
				tokenOf(full.Payload), len(full.Payload)))
		}
	}
	slices.Sort(lines)
	return fmt.Sprintf("%+v lostBefore=%d\n%s", v, rec.LostBefore, strings.Join(lines, "\n"))
}

// TestRandomHistoryClosesItsQueue: a history's queue is closed when its
// test ends, even when the caller stops before closing it (a t.Fatal in a
// later history of the batch, or a directory that kept changing), so that
// a failing batch leaves no open queue, goroutine or lock behind.
func TestRandomHistoryClosesItsQueue(t *testing.T) {
	var q *queue.Queue
	t.Run("history", func(t *testing.T) {
		_, q = randomHistory(t, rand.New(rand.NewSource(1)))
	})
	if _, err := q.Enqueue(context.Background(), []byte("after")); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Enqueue after the history's test ended: %v, want ErrClosed", err)
	}
}

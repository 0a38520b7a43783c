package fuzz_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestOneStoryForDamage damages a queue directory in the ways an operator
// meets (files deleted by hand, a junk file, flipped bits where a valid
// entry follows, a damaged snapshot) and checks that Open, Verify, Repair
// and Options.Salvage tell the same story:
//
//   - Open fails with ErrCorrupt naming the way out, changing nothing;
//   - Verify fails with ErrCorrupt;
//   - Repair succeeds and leaves a directory that Verify finds clean and
//     that opens without Salvage; it reports what was lost;
//   - Open with Salvage succeeds and leaves the same;
//   - after either, every message that comes out has its own payload, and
//     Stats' ready count is what TryDequeue returns (no phantoms).
//
// A file walq did not write (junk with a segment's name) is the exception:
// everything refuses it, naming it, and nothing changes it.
func TestOneStoryForDamage(t *testing.T) {
	rng, _ := testRand(t)
	img, want := storyImage(t, rng)
	segs := segmentFiles(img)
	last, prev := segs[len(segs)-1], segs[len(segs)-2]
	snap := snapshotFiles(img)[0]
	flipIn := func(seg string) func(map[string][]byte) {
		return func(m map[string][]byte) {
			ents := parseSegment(m[seg])
			e := ents[len(ents)-2] // a valid entry follows it
			m[seg][e.end-2] ^= 0x10
		}
	}
	junk := fmt.Sprintf("log/%020d", segIndex(t, last)+1000)
	cases := []struct {
		name    string
		damage  func(map[string][]byte)
		foreign string // a file walq did not write: refused by all, never changed
	}{
		{"first segment deleted", func(m map[string][]byte) { delete(m, segs[0]) }, ""},
		{"middle segment deleted", func(m map[string][]byte) { delete(m, segs[len(segs)/2]) }, ""},
		{"snapshot deleted", func(m map[string][]byte) { delete(m, snap) }, ""},
		{"snapshot bit flipped", func(m map[string][]byte) { m[snap][len(m[snap])/2] ^= 1 }, ""},
		{"bit flipped in the last segment, a valid entry after it", flipIn(last), ""},
		{"bit flipped in the second-to-last segment, a valid entry after it", flipIn(prev), ""},
		{"5-byte junk file named like a segment", func(m map[string][]byte) { m[junk] = []byte("junk\n") }, junk},
		{belowSnapshot, flipPayload(t, img, "A50|"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(img)
			c.damage(bad)
			if c.name == belowSnapshot {
				checkFoundAtDelivery(t, bad, want)
			} else {
				checkRefused(t, bad)
			}
			if c.foreign != "" {
				checkForeignKept(t, bad, c.foreign)
				return
			}
			checkRepaired(t, bad, want)
			checkSalvageAgrees(t, bad, want)
		})
	}
}

// belowSnapshot is the case whose damage Open does not read: a record
// below the snapshot's LSN is checked when a delivery reads it, and Verify
// reads every byte.
const belowSnapshot = "bit flipped below the snapshot, in a waiting message's record"

// flipPayload returns a damage that flips one bit in the payload that
// starts with tok, wherever the image holds it; the test fails if no
// segment does, or if the last one does (that would be a torn tail).
func flipPayload(t *testing.T, img map[string][]byte, tok string) func(map[string][]byte) {
	t.Helper()
	segs := segmentFiles(img)
	for _, seg := range segs[:len(segs)-1] {
		if i := bytes.Index(img[seg], []byte(tok)); i >= 0 {
			return func(m map[string][]byte) { m[seg][i+len(tok)+3] ^= 0x10 }
		}
	}
	t.Fatalf("no sealed segment holds %q", tok)
	return nil
}

// checkFoundAtDelivery checks damage that Open does not read: Open
// succeeds, every message delivered before the damaged one has its own
// payload, the damaged one's delivery fails with ErrCorrupt naming the way
// out (and fails again: the queue does not skip it), and Verify reports it.
func checkFoundAtDelivery(t *testing.T, img map[string][]byte, want map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("Open: %v; damage below the snapshot is found when a delivery reads it", err)
	}
	defer q.Close() // Close is idempotent; Verify below needs the lock
	if _, err := q.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("every message was delivered; the damaged one must fail")
		}
		if err != nil {
			if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), "walq repair") {
				t.Fatalf("delivery: %v; want ErrCorrupt naming walq repair", err)
			}
			break
		}
		if p, ok := want[tokenOf(m.Payload)]; !ok || !bytes.Equal(p, m.Payload) {
			t.Fatalf("message %s delivered with a wrong payload %q", m.ID, m.Payload[:min(len(m.Payload), 20)])
		}
	}
	if _, err := q.TryDequeue(); !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("the next delivery: %v; want ErrCorrupt again", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Verify(dir, nil); !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("Verify: %v; want ErrCorrupt", err)
	}
}

// storyImage is a crash image of a queue with five or more segments, a
// snapshot, never-delivered messages in the first segment (so that every
// segment is needed), dead and leased ones.
func storyImage(t *testing.T, rng *rand.Rand) (map[string][]byte, map[string][]byte) {
	t.Helper()
	dir := scratchDir(t)
	o := &queue.Options{SegmentSize: 4096, ManualRequeue: true, SnapshotBytes: 1 << 30, MaxDeliveries: 1}
	// Only the test's Compacts: a background one would put the snapshot
	// above the records the cases damage, and the story would change.
	testhook.SetManualCompaction(o)
	q := mustOpen(t, dir, o)
	defer q.Close()
	want := make(map[string][]byte)
	enqueue := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			tok := fmt.Sprintf("%s%d", prefix, i)
			p := payload(tok, 40+rng.IntN(120))
			mustEnqueue(t, q, p)
			want[tok] = p
		}
	}
	// A first round, all acked and compacted away: the log then starts
	// after LSN 1, and only the snapshot knows what came before.
	enqueue("Z", 40)
	for i := 0; i < 40; i++ {
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		delete(want, tokenOf(m.Payload))
	}
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	enqueue("A", 100)
	for i := 0; i < 30; i++ {
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			err = m.Ack()
			delete(want, tokenOf(m.Payload))
		} else if i%3 == 1 {
			err = m.DeadLetter("test")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	enqueue("B", 80)
	for i := 0; ; i++ { // the last segment must hold a few entries
		segs := q.Stats().Segments
		if segs[len(segs)-1].Bytes > 1024 {
			break
		}
		enqueue(fmt.Sprintf("C%d.", i), 1)
	}
	img, err := quietDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ents := parseSegment(img[segmentFiles(img)[0]]); len(ents) == 0 || ents[0].first == 1 {
		t.Fatalf("the log still starts at LSN 1; the test needs it truncated")
	}
	if len(snapshotFiles(img)) != 1 || len(segmentFiles(img)) < 5 {
		t.Fatalf("image has %d snapshots, %d segments; the test needs one and five", len(snapshotFiles(img)), len(segmentFiles(img)))
	}
	return img, want
}

// segIndex returns the index in a segment file's name.
func segIndex(t *testing.T, seg string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscanf(filepath.Base(seg), "%d", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkForeignKept checks that Repair and a salvaging Open refuse a
// directory holding a file walq did not write, name it, and change nothing.
func checkForeignKept(t *testing.T, img map[string][]byte, foreign string) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Repair(dir, nil); !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(foreign)) {
		t.Fatalf("Repair: %v; want ErrCorrupt naming %s", err, foreign)
	}
	o := drainOptions()
	o.Salvage = true
	if q, err := queue.Open(dir, &o); err == nil {
		q.Close()
		t.Fatalf("Open with Salvage accepted a file walq did not write")
	}
	after, err := readDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !sameFiles(img, after) {
		t.Fatalf("the directory changed")
	}
}

// checkRepaired runs Repair on the image and checks that it reports what
// was lost, that the result verifies clean, opens without Salvage and
// delivers only right payloads with exact counts.
func checkRepaired(t *testing.T, img map[string][]byte, want map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	backups := 0
	backup := func() error { // the lock is held from start to end
		backups++
		if q, err := queue.Open(dir, nil); !errors.Is(err, queue.ErrLocked) {
			if err == nil {
				q.Close()
			}
			return fmt.Errorf("Open during the repair: %v, want ErrLocked", err)
		}
		return nil
	}
	rep, err := queue.Repair(dir, &queue.RepairOptions{Backup: backup})
	if err != nil {
		t.Fatalf("Repair: %v (report %+v)", err, rep)
	}
	if !rep.Repaired || backups != 1 || rep.Before.Clean() || !rep.After.Clean() {
		t.Fatalf("Repair report: repaired %v, backups %d, before clean %v, after clean %v", rep.Repaired, backups, rep.Before.Clean(), rep.After.Clean())
	}
	if len(rep.LostLSNs()) == 0 && len(rep.Recovery.Dropped) == 0 && rep.Recovery.SnapshotLost.Path == "" {
		t.Fatalf("Repair lost records but its report names none: %+v", rep.Recovery)
	}
	checkOpensClean(t, dir, want)
}

// checkSalvageAgrees opens the image with Salvage, drains it, and checks
// that the directory then verifies clean and opens without Salvage.
func checkSalvageAgrees(t *testing.T, img map[string][]byte, want map[string][]byte) {
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
	drainChecked(t, q, want)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := queue.Verify(dir, nil); err != nil || !c.Clean() {
		t.Fatalf("after a salvaging open, Verify: %v, %+v", err, c)
	}
}

// checkOpensClean checks that dir verifies clean, opens without Salvage and
// drains with right payloads and exact counts.
func checkOpensClean(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	if c, err := queue.Verify(dir, nil); err != nil || !c.Clean() {
		t.Fatalf("after repair, Verify: %v, %+v", err, c)
	}
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("after repair, Open: %v", err)
	}
	defer q.Close()
	if n := drainChecked(t, q, want); n == 0 || n > len(want) {
		t.Fatalf("after repair, drained %d messages of %d", n, len(want))
	}
}

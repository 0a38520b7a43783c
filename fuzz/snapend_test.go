package fuzz_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestLogEndsBeforeSnapshot cuts the last segment of a queue directory
// below the LSN of its snapshot (a disk that lost fsynced data, a file
// restored from an older backup), in several ways, and checks that this is
// damage, never a torn tail:
//
//   - Open without Salvage fails with ErrCorrupt naming the way out, and
//     changes no file; Verify says the same;
//   - Open with Salvage delivers only whole, right payloads (never an empty
//     or foreign one), counts no phantom messages, and writes every new
//     record above the snapshot's LSN, so that a crash after it loses
//     nothing it acknowledged and the next Open is clean.
func TestLogEndsBeforeSnapshot(t *testing.T) {
	rng, _ := testRand(t)
	img, want := snapEndImage(t, rng)
	for _, c := range snapEndCuts(t, img) {
		t.Run(c.name, func(t *testing.T) {
			cut := maps(img)
			c.cut(cut)
			checkRefused(t, cut)
			checkSalvagedSnapEnd(t, cut, want)
		})
	}
}

// snapEndImage builds a crash image whose newest snapshot reflects the last
// record of the log, with messages never delivered, leased, acked and dead;
// it returns the image and the payload of every message enqueued.
func snapEndImage(t *testing.T, rng *rand.Rand) (map[string][]byte, map[string][]byte) {
	t.Helper()
	dir := scratchDir(t)
	o := &queue.Options{SegmentSize: 4096, ManualRequeue: true, SnapshotBytes: 1 << 30, MaxDeliveries: 1}
	testhook.SetManualCompaction(o) // the snapshots are the test's own
	q := mustOpen(t, dir, o)
	defer q.Close()
	want := make(map[string][]byte)
	for i := 0; i < 150; i++ {
		tok := fmt.Sprintf("S%d", i)
		p := payload(tok, 40+rng.IntN(120))
		mustEnqueue(t, q, p)
		want[tok] = p
	}
	for i := 0; i < 60; i++ {
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i%3 == 0:
			err = m.Ack()
		case i%3 == 1:
			err = m.DeadLetter("test")
		} // else: left leased
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	// Messages whose enqueue records are in the last segment, which the
	// cuts lose: the snapshot counts them as never delivered. The payload
	// sizes are random, so a segment may have just rolled: more come until
	// the last segment holds the three entries the cuts need.
	var img map[string][]byte
	for i := 0; img == nil; i++ {
		tok := fmt.Sprintf("L%d", i)
		p := payload(tok, 40+rng.IntN(120))
		mustEnqueue(t, q, p)
		want[tok] = p
		if i < 40 {
			continue
		}
		if err := q.Compact(); err != nil {
			t.Fatal(err)
		}
		got, err := quietDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if segs := segmentFiles(got); len(parseSegment(got[segs[len(segs)-1]])) >= 3 {
			img = got
		} else if i > 200 {
			t.Fatalf("the last segment never held three entries")
		}
	}
	if len(snapshotFiles(img)) != 1 || len(segmentFiles(img)) < 3 {
		t.Fatalf("image has %d snapshots, %d segments", len(snapshotFiles(img)), len(segmentFiles(img)))
	}
	return img, want
}

func maps(img map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(img))
	for k, v := range img {
		out[k] = slices.Clone(v)
	}
	return out
}

// checkRefused checks that Open and Verify report the image as corrupt,
// name the way out, and leave every file as it was.
func checkRefused(t *testing.T, img map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(dir, &queue.Options{})
	if err == nil {
		q.Close()
		t.Fatalf("Open succeeded on a log that ends before its snapshot; Recovery: %+v", q.Recovery())
	}
	if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), "walq repair") || !strings.Contains(err.Error(), "Salvage") {
		t.Fatalf("Open: %v; want ErrCorrupt naming walq repair and Options.Salvage", err)
	}
	after, rerr := readDir(dir)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !sameFiles(img, after) {
		t.Fatalf("a refused Open changed the directory")
	}
	if _, err := queue.Verify(dir, nil); !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("Verify: %v; want ErrCorrupt", err)
	}
}

// checkSalvagedSnapEnd opens the image with Salvage, drains it checking
// every payload, then enqueues more, takes a crash image and checks that
// the next Open (no Salvage) is clean and keeps them.
func checkSalvagedSnapEnd(t *testing.T, img map[string][]byte, want map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	o.Salvage = true
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("Open with Salvage: %v", err)
	}
	snapLSN := q.Recovery().SnapshotLSN
	if len(q.Recovery().Log.Salvaged) == 0 {
		t.Errorf("Recovery().Log.Salvaged is empty; the lost records must be reported")
	}
	seen := drainChecked(t, q, want)
	t.Logf("salvaged: %d messages delivered; recovery %+v", seen, q.Recovery())
	if l := q.Stats().LastLSN; l < snapLSN {
		t.Fatalf("after the salvage the log ends at LSN %d, below the snapshot's %d: new records would reuse its LSNs", l, snapLSN)
	}
	var fresh []string
	for i := 0; i < 5; i++ {
		tok := fmt.Sprintf("F%d", i)
		mustEnqueue(t, q, payload(tok, 30))
		fresh = append(fresh, tok)
	}
	crash, err := readDir(dir) // a kill -9 now: everything enqueued is fsynced (SyncNever wrote it)
	q.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir2 := filepath.Join(scratchDir(t), "r")
	if err := writeDir(dir2, crash); err != nil {
		t.Fatal(err)
	}
	d, err := drainQueue(dir2)
	if err != nil {
		t.Fatalf("after the salvage and a crash, Open without Salvage: %v", err)
	}
	for _, tok := range fresh {
		if !slices.Contains(d.tokens, tok) {
			t.Fatalf("message %s enqueued after the salvage was lost by a crash (drained %d, %d before)", tok, len(d.tokens), seen)
		}
	}
}

// drainChecked leases every message of q, checking each payload against
// want, and that Stats' ready count matches what came out.
func drainChecked(t *testing.T, q *queue.Queue, want map[string][]byte) int {
	t.Helper()
	if _, err := q.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RequeueAllDead(); err != nil {
		t.Fatal(err)
	}
	ready := q.Stats().Ready
	got := map[string]bool{}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("drain after %d messages: %v", len(got), err)
		}
		tok := tokenOf(m.Payload)
		if p, ok := want[tok]; !ok || !bytes.Equal(p, m.Payload) {
			t.Fatalf("message %s delivered with a wrong payload of %d bytes %q", m.ID, len(m.Payload), m.Payload[:min(len(m.Payload), 20)])
		}
		if got[tok] {
			t.Fatalf("message %s delivered twice", tok)
		}
		got[tok] = true
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(got)) != ready {
		t.Fatalf("Stats said %d ready, TryDequeue returned %d", ready, len(got))
	}
	return len(got)
}

// snapEndCut is one way to end a crash image's last segment early.
type snapEndCut struct {
	name string
	cut  func(map[string][]byte)
}

// snapEndCuts returns the ways the tests end img's last segment below its
// snapshot: mid-entry, at an entry boundary, emptied, removed.
func snapEndCuts(t *testing.T, img map[string][]byte) []snapEndCut {
	t.Helper()
	segs := segmentFiles(img)
	last := segs[len(segs)-1]
	ents := parseSegment(img[last])
	if len(ents) < 3 {
		t.Fatalf("the last segment holds %d entries; the test needs three", len(ents))
	}
	mid := ents[len(ents)/2]
	return []snapEndCut{
		{"cut mid-entry", func(m map[string][]byte) { m[last] = m[last][:mid.off+(mid.end-mid.off)/2] }},
		{"cut at an entry boundary", func(m map[string][]byte) { m[last] = m[last][:mid.off] }},
		{"last segment emptied", func(m map[string][]byte) { m[last] = nil }},
		{"last segment removed", func(m map[string][]byte) { delete(m, last) }},
	}
}

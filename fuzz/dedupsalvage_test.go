package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSalvageForgetsLostIDs damages the sealed segments of a queue whose
// messages have producer-given ids and whose snapshot was taken while they
// were all pending, one corruption at a time (an entry's bits or bytes, a
// sector, a segment cut short or removed), opens it with Salvage,
// and drains and acks what is left. With DedupWindow 0 only a live message
// refuses its id, so afterwards every id must be accepted again: an id
// whose message the damage took must not refuse its producer's retry
// forever. It checks so after a reopen without Salvage too: the salvage's
// snapshot must keep what it forgot. Under the race detector it checks
// every third damage case.
func TestSalvageForgetsLostIDs(t *testing.T) {
	rng, _ := testRand(t)
	img, ids := dedupImage(t)
	cases := raceThinned(segmentDamage(rng, img, false))
	segs := segmentFiles(img)
	checked := 0
	for _, c := range cases {
		if c.file == segs[len(segs)-1] {
			continue // the tail: the snapshot's LSN is in it
		}
		checkIDsAfterSalvage(t, img, c, ids)
		checked++
	}
	if checked == 0 {
		t.Fatal("no sealed segment before the snapshot to damage")
	}
	t.Logf("SUMMARY dedup after salvage: %d cases", checked)
}

// dedupImage is the directory of a queue of 80 messages with ids P0..P79,
// all pending, in 4 KiB segments, closed cleanly (so with a snapshot that
// holds every id).
func dedupImage(t *testing.T) (map[string][]byte, []string) {
	dir := scratchDir(t)
	q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
	var ids []string
	for i := 0; i < 80; i++ {
		id := fmt.Sprintf("P%d", i)
		mustEnqueue(t, q, payload(id, 100), queue.WithID(id))
		ids = append(ids, id)
	}
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := readDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshotFiles(img)) != 1 || len(segmentFiles(img)) < 3 {
		t.Fatalf("image has %d snapshots and %d segments; the test needs one and at least three",
			len(snapshotFiles(img)), len(segmentFiles(img)))
	}
	return img, ids
}

// checkIDsAfterSalvage opens the damaged image with Salvage, acks every
// message left, and checks that every id is accepted again.
func checkIDsAfterSalvage(t *testing.T, img map[string][]byte, c damageCase, ids []string) {
	t.Helper()
	dir := writeDamaged(t, "q", img, c)
	defer os.RemoveAll(dir)
	o := drainOptions()
	o.Salvage = true
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("%s: Open with Salvage: %v", c.name, err)
	}
	defer func() { q.Close() }()
	got := make(map[string]bool)
	var held []*queue.Message
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("%s: drain: %v", c.name, err)
		}
		if tok := tokenOf(m.Payload); tok != m.ID || got[tok] {
			t.Fatalf("%s: delivered %q with id %q (twice: %v)", c.name, tok, m.ID, got[tok])
		}
		got[m.ID] = true
		held = append(held, m)
	}
	checkLiveIDs(t, q, c, ids, got)
	for _, m := range held {
		if err := m.Ack(); err != nil {
			t.Fatalf("%s: ack %s: %v", c.name, m.ID, err)
		}
	}
	dropped := len(q.Recovery().Dropped)
	// The salvage's snapshot keeps what it forgot: open again without it.
	if err := q.Close(); err != nil {
		t.Fatalf("%s: Close: %v", c.name, err)
	}
	o.Salvage = false
	q, err = queue.Open(dir, &o)
	if err != nil {
		t.Fatalf("%s: Open after the salvage: %v", c.name, err)
	}
	for _, id := range ids {
		if _, err := q.Enqueue(context.Background(), payload(id, 10), queue.WithID(id)); err != nil {
			t.Fatalf("%s: after the salvage (%d of %d messages left, %d dropped), Enqueue WithID(%q) (delivered: %v): %v",
				c.name, len(got), len(ids), dropped, id, got[id], err)
		}
	}
}

// checkLiveIDs: while the messages the salvage kept are leased (live), an
// Enqueue with the id of one of them is refused, and one with the id of a
// message the damage took is accepted (the DedupWindow is 0); the
// accepted ones are then leased and acked again, to leave the queue empty.
func checkLiveIDs(t *testing.T, q *queue.Queue, c damageCase, ids []string, live map[string]bool) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		_, err := q.Enqueue(ctx, payload(id, 10), queue.WithID(id))
		switch {
		case live[id] && !errors.Is(err, queue.ErrDuplicate):
			t.Fatalf("%s: Enqueue WithID(%q) of a message the salvage kept, leased: %v; want ErrDuplicate", c.name, id, err)
		case !live[id] && err != nil:
			t.Fatalf("%s: Enqueue WithID(%q) of a message the damage took: %v", c.name, id, err)
		}
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return
		}
		if err != nil {
			t.Fatalf("%s: drain the re-enqueued: %v", c.name, err)
		}
		if live[m.ID] {
			t.Fatalf("%s: %q delivered twice", c.name, m.ID)
		}
		if err := m.Ack(); err != nil {
			t.Fatalf("%s: ack %s: %v", c.name, m.ID, err)
		}
	}
}

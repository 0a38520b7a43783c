package fuzz_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSalvageKeepsLimitDeadLetters: A was delivered three times, then an
// open with MaxDeliveries 3 dead-lettered it when a delivery would take
// it (a dead-letter that names no lease). Damage takes every lease and
// nack record of A, and leaves its dead-letter. A salvage must keep A
// dead: copied forward as never delivered, A, a poison message, would
// get MaxDeliveries more deliveries. What the salvage keeps must outlast
// a compaction and a plain reopen.
func TestSalvageKeepsLimitDeadLetters(t *testing.T) {
	dir := limitDeadImage(t)
	o := drainOptions()
	o.Salvage, o.MaxDeliveries = true, 3
	q := mustOpen(t, lostEntryImage(t, dir, leaseRecordsOf(t, dir, "A")...), &o)
	t.Cleanup(func() { _ = q.Close() })
	if len(q.Recovery().Log.Salvaged) == 0 {
		t.Fatal("the salvage found no damage")
	}
	if got := drainTokens(t, q); slices.Contains(got, "A") {
		t.Fatalf("A, dead-lettered at its limit, delivered again after the salvage (%d deliveries: %v…)", len(got), got[:3])
	}
	checkLimitDead(t, "after the salvage", q)
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	d := q.Dir()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	plain := drainOptions()
	q2 := mustOpen(t, d, &plain)
	t.Cleanup(func() { _ = q2.Close() })
	checkLimitDead(t, "after a compaction and a plain reopen", q2)
}

// limitDeadImage returns a queue directory whose log holds A's three
// deliveries and nacks, A's dead-letter at the limit of a later open,
// B's delivery and ack, and 100 messages after them. The queue stays open
// until the test ends, so that no snapshot covers the log.
func limitDeadImage(t *testing.T) string {
	t.Helper()
	dir := scratchDir(t)
	opts := &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, MaxDeliveries: 10, ManualRequeue: true}
	q := mustOpen(t, dir, opts)
	mustEnqueue(t, q, payload("A", 10))
	mustEnqueue(t, q, payload("B", 10))
	for range 3 {
		if err := mustDequeue(t, q, "A").Nack(0); err != nil {
			t.Fatal(err)
		}
	}
	img, err := quietDir(dir) // a crash image: Close would write a snapshot
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Close()
	d := filepath.Join(scratchDir(t), "q")
	if err := writeDir(d, img); err != nil {
		t.Fatal(err)
	}
	opts.MaxDeliveries = 3
	q = mustOpen(t, d, opts)
	// Closed after lostEntryImage: Close would write a snapshot.
	t.Cleanup(func() { _ = q.Close() })
	// A is dead-lettered on the way to B.
	if err := mustDequeue(t, q, "B").Ack(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		mustEnqueue(t, q, payload("F", 100))
	}
	return d
}

// leaseRecordsOf returns the LSNs of the lease and nack records of the
// message tok in the log of dir.
func leaseRecordsOf(t *testing.T, dir, tok string) []uint64 {
	t.Helper()
	var seq uint64
	var lsns []uint64
	err := queue.ReadLog(dir, 0, func(r queue.Record) error {
		if r.Op == "enqueue" && tokenOf(r.Payload) == tok {
			seq = r.Seq
		}
		if r.Seq == seq && (r.Op == "lease" || r.Op == "nack") {
			lsns = append(lsns, r.LSN)
		}
		return nil
	})
	if err != nil || len(lsns) != 6 {
		t.Fatalf("lease and nack records of %s: %v, %v; want 6", tok, lsns, err)
	}
	return lsns
}

// checkLimitDead fails the test unless the dead set of q is A alone,
// with the reason of a dead-letter at the limit.
func checkLimitDead(t *testing.T, what string, q *queue.Queue) {
	t.Helper()
	dl, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dl) != 1 || tokenOf(dl[0].Payload) != "A" || !strings.Contains(dl[0].Reason, "limit 3") {
		t.Fatalf("%s: dead set %+v, want A dead-lettered at limit 3", what, dl)
	}
}

package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSalvageFallsBackToOlderSnapshot: every message of round 1 (with
// producer ids) is acked and a Compact truncates the log past them; round
// 2 enqueues more and a second Compact is caught with both snapshots on
// disk, the newer of which is then damaged. The log still continues the
// older snapshot, so the preview and the repair must rebuild from it (not
// from an empty state): the round-1 ids still refuse a re-enqueue, the
// round-2 messages are all there, and Recovery names the snapshot used
// and the one set aside.
func TestSalvageFallsBackToOlderSnapshot(t *testing.T) {
	held := twoSnapshotImage(t)
	snaps := snapshotFiles(held)
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v, want the older and the newer", snaps)
	}
	img := damaged(held, damageCase{file: snaps[1], damage: flipBit(int64(len(held[snaps[1]])/2), 2)})
	rd := filepath.Join(scratchDir(t), "q")
	if err := writeDir(rd, img); err != nil {
		t.Fatal(err)
	}
	po := queue.Options{ReadOnly: true, Salvage: true}
	p, err := queue.Open(rd, &po)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	checkFallBack(t, "preview", p.Recovery(), snaps)
	p.Close()
	rep, err := queue.Repair(rd, nil)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	checkFallBack(t, "repair", rep.Recovery, snaps)
	// The ids first: the drain's clock runs a day ahead, past their window.
	if forgot := forgottenIDs(t, rd, 60); forgot > 0 {
		t.Errorf("%d of 60 ids acked before the older (valid) snapshot enqueued again after the repair", forgot)
	}
	d, err := drainQueue(rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.tokens) != 10 {
		t.Errorf("drained %d messages %v, want the 10 of round 2", len(d.tokens), d.tokens)
	}
}

// twoSnapshotImage returns the image of a queue directory taken while its
// second Compact had both snapshots on disk: the older one holds 60 acked
// ids (id-A0..), the log after it 10 messages with ids id-B0...
func twoSnapshotImage(t *testing.T) map[string][]byte {
	return secondCompactImage(t, func(q *queue.Queue) { ackedIDs(t, q, "A", 60) },
		func(q *queue.Queue) { enqueueIDs(t, q, "B", 10) })
}

// secondCompactImage returns the image of a queue directory taken while
// its second Compact had both snapshots on disk (the newer one synced into
// the directory, the older not yet removed): round1 runs before the first
// Compact, round2 between the two.
func secondCompactImage(t *testing.T, round1, round2 func(*queue.Queue)) map[string][]byte {
	dir := scratchDir(t)
	o := queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true, AckTimeout: time.Hour,
		DedupWindow: 24 * time.Hour}
	testhook.SetManualCompaction(&o)
	var held map[string][]byte
	armed := false
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
	round1(q)
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	round2(q)
	armed = true
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	if held == nil {
		t.Fatal("the second Compact never had both snapshots on disk")
	}
	return held
}

// ackedIDs enqueues n messages with ids id-<prefix>0… (payload tokens
// <prefix>0…) and takes each through a dequeue and an ack.
func ackedIDs(t *testing.T, q *queue.Queue, prefix string, n int) {
	for i := range n {
		tok := fmt.Sprintf("%s%d", prefix, i)
		mustEnqueue(t, q, payload(tok, 100), queue.WithID("id-"+tok))
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

// enqueueIDs enqueues n messages with ids id-<prefix>0… (payload tokens
// <prefix>0…).
func enqueueIDs(t *testing.T, q *queue.Queue, prefix string, n int) {
	for i := range n {
		tok := fmt.Sprintf("%s%d", prefix, i)
		mustEnqueue(t, q, payload(tok, 100), queue.WithID("id-"+tok))
	}
}

// checkFallBack checks that rec rebuilt from the older of snaps and set
// the newer aside.
func checkFallBack(t *testing.T, what string, rec queue.Recovery, snaps []string) {
	t.Helper()
	older, newer := snapshotLSN(t, snaps[0]), snapshotLSN(t, snaps[1])
	if rec.SnapshotLSN != older || rec.SnapshotLost.LSN != newer || rec.LostBefore != 0 {
		t.Errorf("%s: SnapshotLSN %d, SnapshotLost LSN %d, LostBefore %d; want %d (the older), %d (the damaged), 0",
			what, rec.SnapshotLSN, rec.SnapshotLost.LSN, rec.LostBefore, older, newer)
	}
}

// snapshotLSN returns the LSN a snapshot file is named for.
func snapshotLSN(t *testing.T, name string) uint64 {
	t.Helper()
	var lsn uint64
	if _, err := fmt.Sscanf(filepath.Base(name), "snapshot-%d.snap", &lsn); err != nil {
		t.Fatalf("snapshot name %q: %v", name, err)
	}
	return lsn
}

// forgottenIDs opens the queue in dir and returns how many of the ids
// id-A0..id-A<n-1> an enqueue no longer refuses as duplicates.
func forgottenIDs(t *testing.T, dir string, n int) int {
	t.Helper()
	o := drainOptions()
	o.Clock, o.DedupWindow = nil, 24*time.Hour
	q, err := queue.Open(dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	forgot := 0
	for i := range n {
		_, err := q.Enqueue(context.Background(), []byte("again"), queue.WithID(fmt.Sprintf("id-A%d", i)))
		if !errors.Is(err, queue.ErrDuplicate) {
			forgot++
		}
	}
	return forgot
}

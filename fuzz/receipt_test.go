package fuzz_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestStaleBatchReceiptAfterPowerLoss: a pull record is written, not
// fsynced, before Pull returns, so a power loss can take it while its
// receipt lives on in another process; the next run gives its LSN to
// another record. A batch receipt named only that LSN, and the holder of
// the lost delivery, acking it by receipt (Sorted.Ack, as another process
// or a later run may), acked the batch that the LSN now named: another
// key's values, pulled by another consumer, gone without being processed.
// The receipt must be refused (ErrLeaseLost) and the values stay.
func TestStaleBatchReceiptAfterPowerLoss(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(scratchDir(t), "q")
	o := &queue.SortedOptions{Options: queue.Options{Sync: queue.SyncAlways, ManualRequeue: true}}
	s, err := queue.OpenSorted[int64](dir, o)
	must(t, err)
	must(t, s.Publish(ctx, 1, "k1", payload("one", 10)))
	must(t, s.Publish(ctx, 2, "k2", payload("two", 10)))
	must(t, s.Close())

	// Run 2: a consumer pulls both keys and keeps the receipts.
	s, err = queue.OpenSorted[int64](dir, o)
	must(t, err)
	bs, err := s.TryPull(10)
	must(t, err)
	if len(bs) != 2 {
		t.Fatalf("pulled %d batches, want 2", len(bs))
	}
	stale, first := bs[1].Receipt, bs[0].Receipt.Lease
	img, err := readDir(dir)
	must(t, err)
	must(t, s.Close())
	// The power loss: the pull records were never fsynced; the tail loses
	// them, as it may lose any bytes written after its last fsync.
	segs := segmentFiles(img)
	tail := segs[len(segs)-1]
	for _, e := range parseSegment(img[tail]) {
		if e.lastLSN() >= first {
			img[tail] = img[tail][:e.off]
			break
		}
	}
	dir3 := filepath.Join(scratchDir(t), "r")
	must(t, writeDir(dir3, img))

	// Run 3: a new value, pulled first by another consumer, takes the LSN
	// of the lost pull of k2.
	s, err = queue.OpenSorted[int64](dir3, o)
	must(t, err)
	defer s.Close()
	must(t, s.Publish(ctx, 0, "k0", payload("zero", 10)))
	ys, err := s.TryPull(1)
	must(t, err)
	if ys[0].Key != "k0" || ys[0].Receipt.Lease != stale.Lease {
		t.Fatalf("run 3 pulled %s as %s; the test needs k0 pulled under lease %d", ys[0].Key, ys[0].Receipt, stale.Lease)
	}
	if err := s.Ack(stale); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("the receipt %s of k2's lost delivery settled k0's batch %s: %v; want ErrLeaseLost", stale, ys[0].Receipt, err)
	}
	for _, settle := range []func(queue.BatchReceipt) error{
		func(r queue.BatchReceipt) error { return s.Nack(r, 0) },
		func(r queue.BatchReceipt) error { return s.Extend(r, 1) },
		func(r queue.BatchReceipt) error { return s.DeadLetter(r, "stale") },
	} {
		if err := settle(stale); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("a settle by the stale receipt %s: %v; want ErrLeaseLost", stale, err)
		}
	}
	// The consumer that holds k0's batch still owns it, and k1 and k2
	// are there for the next pull.
	must(t, ys[0].Nack(0))
	d := drainSortedTokens(t, s)
	for _, tok := range []string{"zero", "one", "two"} {
		if d[tok] != 1 {
			t.Fatalf("after the stale receipt, %s was pulled %d times, want once (pulled: %v)", tok, d[tok], d)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// drainSortedTokens pulls every value of s and counts their tokens.
func drainSortedTokens(t *testing.T, s *queue.Sorted[int64]) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for {
		bs, err := s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			return got
		}
		must(t, err)
		for _, b := range bs {
			for _, v := range b.Values {
				got[tokenOf(v.Payload)]++
			}
			must(t, b.Ack())
		}
	}
}

// TestStaleReceiptAfterPowerLoss is TestStaleBatchReceiptAfterPowerLoss
// for the ack queue. A consumer may get a message whose enqueue is written
// but not yet fsynced, and its lease record is fsynced with a later
// commit: a power loss can take both. A Receipt named only their LSNs, so
// the next run's first message and delivery took the same Seq and Lease,
// and the stale receipt acked a message its holder never got, whose
// Enqueue had returned under SyncAlways.
func TestStaleReceiptAfterPowerLoss(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(scratchDir(t), "q")
	o := &queue.Options{Sync: queue.SyncAlways, ManualRequeue: true}
	q, err := queue.Open(dir, o)
	must(t, err)
	mustEnqueue(t, q, payload("first", 10))
	m, err := q.TryDequeue()
	must(t, err)
	must(t, m.Ack())
	durable, err := readDir(dir) // every call so far returned: all fsynced
	must(t, err)
	// A message enqueued without waiting for its commit, delivered once
	// written: neither its enqueue nor its lease is durable yet.
	if _, err := q.EnqueueAsync(ctx, payload("lost", 10)); err != nil {
		t.Fatal(err)
	}
	x, err := q.Dequeue(ctx)
	must(t, err)
	stale := x.Receipt
	must(t, q.Close())

	// The power loss keeps what was durable before them.
	dir2 := filepath.Join(scratchDir(t), "r")
	must(t, writeDir(dir2, durable))
	q, err = queue.Open(dir2, o)
	must(t, err)
	defer q.Close()
	mustEnqueue(t, q, payload("new", 10))
	y, err := q.TryDequeue()
	must(t, err)
	if y.Receipt.Seq != stale.Seq || y.Receipt.Lease != stale.Lease {
		t.Fatalf("the new delivery is %s; the test needs it at the stale receipt's %s", y.Receipt, stale)
	}
	for _, settle := range []func(queue.Receipt) error{
		q.Ack,
		func(r queue.Receipt) error { return q.Nack(r, 0) },
		func(r queue.Receipt) error { return q.Extend(r, 1) },
		func(r queue.Receipt) error { return q.DeadLetter(r, "stale") },
		func(r queue.Receipt) error { return q.Settle(queue.Settlement{Receipt: r, Op: queue.SettleAck}) },
	} {
		if err := settle(stale); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("a settle by the receipt %s of the lost delivery (of %q): %v; want ErrLeaseLost", stale, tokenOf(x.Payload), err)
		}
	}
	must(t, y.Ack()) // the consumer that got it still owns it
}

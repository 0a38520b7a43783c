// Package unreadable opens, for tests of what reads a queue's figures (the
// dashboard, the Prometheus collector, the walq command), ack queues whose
// log cannot be read where Stats reads it: Queue, whose log a failed write
// has poisoned and whose written records cannot be read back (its Stats
// carry CountsErr), and OldestDamaged, whose oldest never-delivered
// message's record is damaged (its Stats carry OldestErr); both errors
// wrap queue.ErrCorrupt. The damage is made on disk, as a disk would make
// it, never by the queue's own bookkeeping.
package unreadable

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// ErrWrite is the failure of the write that poisons the log.
var ErrWrite = errors.New("unreadable: batch write failed")

// Ready is how many messages the queue's calls enqueued: the Ready of its
// Stats, the enqueue whose write failed included.
const Ready = batches*perBatch + 1

const (
	batches  = 40
	perBatch = 30
)

// failingFS is the real file system, except that once armed every batch
// write of the log fails.
type failingFS struct {
	wal.OSFS
	armed atomic.Bool
}

// StoreOp fails a batch write once the FS is armed.
func (f *failingFS) StoreOp(op string) error {
	if op == wal.StoreWriteBatch && f.armed.Load() {
		return ErrWrite
	}
	return nil
}

// Queue returns such a queue, open in a directory of t's, closed when t
// ends.
func Queue(t testing.TB) *queue.Queue {
	t.Helper()
	dir, fs := t.TempDir(), &failingFS{}
	q, err := queue.Open(dir, &queue.Options{FS: fs, ManualRequeue: true, SegmentSize: 4096, Sync: queue.SyncNever})
	must(t, err)
	t.Cleanup(func() { _ = q.Close() }) // a poisoned log's Close fails, by design
	items := make([]queue.Item, perBatch)
	for i := range items {
		items[i].Payload = bytes.Repeat([]byte("x"), 100)
	}
	for range batches {
		_, err := q.EnqueueBatch(context.Background(), items)
		must(t, err)
	}
	fs.armed.Store(true)
	if _, err := q.Enqueue(context.Background(), []byte("its write fails")); !errors.Is(err, ErrWrite) {
		t.Fatalf("the armed write did not fail: %v", err)
	}
	damage(t, dir)
	return q
}

// damage flips a byte in the middle of a sealed segment, far from the
// tail the log keeps in memory.
func damage(t testing.TB, dir string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	must(t, err)
	if len(segs) < 10 {
		t.Fatalf("want many segments, have %d", len(segs))
	}
	victim := segs[len(segs)/2]
	b, err := os.ReadFile(victim)
	must(t, err)
	b[len(b)/2] ^= 0xff
	must(t, os.WriteFile(victim, b, 0o600))
}

// OldestReady is how many messages OldestDamaged's queue holds, all
// ready, the damaged one first.
const OldestReady = 8

// OldestDamaged returns a healthy queue whose oldest never-delivered
// message's enqueue record was damaged on disk while it was closed, in a
// sealed segment below the snapshot, which the open does not read: its
// Stats carry OldestErr and no OldestEnqueuedAt. It is open in a
// directory of t's, closed when t ends.
func OldestDamaged(t testing.TB) *queue.Queue {
	t.Helper()
	dir := t.TempDir()
	o := queue.Options{ManualRequeue: true, SegmentSize: 4096}
	testhook.SetManualCompaction(&o)
	q, err := queue.Open(dir, &o)
	must(t, err)
	pad := bytes.Repeat([]byte("p"), 600) // OldestReady fill the first segment
	for i := range OldestReady {
		p := []byte("sound")
		if i == 0 {
			p = []byte("DAMAGED")
		}
		_, err := q.Enqueue(context.Background(), append(p, pad...))
		must(t, err)
	}
	must(t, q.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	must(t, err)
	if len(segs) < 2 {
		t.Fatalf("the damaged record's segment is the tail: %d segments", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	must(t, err)
	i := bytes.Index(b, []byte("DAMAGED"))
	if i < 0 {
		t.Fatalf("no DAMAGED in %s", segs[0])
	}
	b[i] ^= 0x20
	must(t, os.WriteFile(segs[0], b, 0o600))
	q, err = queue.Open(dir, &o)
	must(t, err)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

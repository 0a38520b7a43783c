package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// TestLoneAckAsyncIsWritten: an AckAsync whose Pending nobody looks at,
// with no call after it, is written to the log on its own, under both
// sync modes: the first one after Open, and one after a stream of Dequeue
// and AckAsync whose acks the next delivery's write took. The test reads
// the log directory's size and never calls Wait, Done, Err or Flush,
// which would write the ack or wake the committer themselves.
func TestLoneAckAsyncIsWritten(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"SyncAlways", queue.SyncAlways}, {"SyncNever", queue.SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{Sync: mode.sync, AppendOnly: true}) // a write shows as the log's size
			defer q.Close()
			items := make([]queue.Item, 500)
			for i := range items {
				items[i].Payload = []byte("m")
			}
			if _, err := q.EnqueueBatch(context.Background(), items); err != nil {
				t.Fatal(err)
			}
			loneAck(t, q, dir, "the first ack after Open")
			for range 400 {
				m, err := q.Dequeue(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.AckAsync(); err != nil {
					t.Fatal(err)
				}
			}
			loneAck(t, q, dir, "the ack after a stream of them")
		})
	}
}

// loneAck dequeues a message, acks it with AckAsync, and waits until the
// log directory grows by the ack's record, without touching its Pending;
// it fails the test if that takes more than a minute.
func loneAck(t *testing.T, q *queue.Queue, dir, what string) {
	t.Helper()
	m, err := q.Dequeue(context.Background()) // returns once its lease is written
	if err != nil {
		t.Fatal(err)
	}
	before := logBytes(t, dir)
	if _, err := m.AckAsync(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); logBytes(t, dir) == before; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: AckAsync with no call after it not written after a minute (log still %d bytes)", what, before)
		}
		time.Sleep(time.Millisecond)
	}
}

// logBytes returns the size of the files in the queue's log directory.
func logBytes(t *testing.T, dir string) int64 {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestCloseWritesLateAck: Close right after an AckAsync whose record
// waits for a later write (after a stream of Dequeue and AckAsync, under
// SyncInterval and SyncNever) completes its Pending without error and
// leaves the ack in the log: after a reopen the message is not delivered
// again.
func TestCloseWritesLateAck(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"SyncAlways", queue.SyncAlways}, {"SyncInterval", queue.SyncInterval}, {"SyncNever", queue.SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			o := &queue.Options{Sync: mode.sync, SyncInterval: time.Hour, AppendOnly: true}
			q := open(t, dir, o)
			items := make([]queue.Item, 300)
			for i := range items {
				items[i].Payload = []byte("m")
			}
			if _, err := q.EnqueueBatch(ctx, items); err != nil {
				t.Fatal(err)
			}
			var p *queue.Pending
			for range 200 { // the last ack has no call after it but Close
				m, err := q.Dequeue(ctx)
				if err == nil {
					p, err = m.AckAsync()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			default:
				t.Fatal("the last AckAsync's Pending not complete after Close")
			}
			if err := p.Err(); err != nil {
				t.Fatalf("the last AckAsync's Pending after Close: %v", err)
			}
			q = open(t, dir, o)
			defer q.Close()
			if s := q.Stats(); s.Ready != 100 || s.InFlight != 0 {
				t.Fatalf("reopened after Close: %d ready, %d in flight; want 100 and 0 (200 acked)", s.Ready, s.InFlight)
			}
		})
	}
}

package queue_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// Each call Options.Logger allows a handler returns when a handler of
// each background event makes it: none waits for the housekeeper that
// runs the handler.
func TestLoggerHandlerCallsReturn(t *testing.T) {
	calls := map[string]func(q *queue.Queue) error{
		"Stats": func(q *queue.Queue) error { _ = q.Stats(); return nil },
		"Enqueue": func(q *queue.Queue) error {
			_, err := q.Enqueue(context.Background(), []byte("from the handler"))
			return err
		},
		"EnqueueAsync": func(q *queue.Queue) error {
			p, err := q.EnqueueAsync(context.Background(), []byte("async from the handler"))
			if err != nil {
				return err
			}
			return p.Wait(context.Background())
		},
		"Flush": func(q *queue.Queue) error { return q.Flush(context.Background()) },
		"DequeueAck": func(q *queue.Queue) error {
			m, err := q.TryDequeue()
			if err != nil {
				return err
			}
			return m.Ack()
		},
		"RequeueExpired": func(q *queue.Queue) error { _, err := q.RequeueExpired(); return err },
		"Compact":        func(q *queue.Queue) error { return q.Compact() },
	}
	// Each event's start opens the queue, hands it to set before it does
	// what makes the event, and returns it.
	events := map[string]func(t *testing.T, h slog.Handler, set func(*queue.Queue)) *queue.Queue{
		"leases ran out": func(t *testing.T, h slog.Handler, set func(*queue.Queue)) *queue.Queue {
			q := open(t, t.TempDir(), &queue.Options{AckTimeout: 50 * time.Millisecond, Logger: slog.New(h)})
			set(q)
			enqueue(t, q, "a")
			tryDequeue(t, q)
			return q
		},
		"compacted": func(t *testing.T, h slog.Handler, set func(*queue.Queue)) *queue.Queue {
			q := open(t, t.TempDir(), &queue.Options{SnapshotBytes: 1, SegmentSize: 4096, Logger: slog.New(h)})
			set(q)
			enqueue(t, q, "a")
			enqueue(t, q, "b")
			return q
		},
		"refuses writes": func(t *testing.T, h slog.Handler, set func(*queue.Queue)) *queue.Queue {
			fsys := faultfs.New(0)
			q := open(t, t.TempDir(), &queue.Options{FS: fsys, AckTimeout: 50 * time.Millisecond, Logger: slog.New(h)})
			set(q) // the event is logged once, maybe before Enqueue returns
			enqueue(t, q, "leased")
			tryDequeue(t, q)
			fsys.FailNext(wal.StoreWriteBatch)
			_, _ = q.Enqueue(context.Background(), []byte("its write fails"))
			return q
		},
	}
	for ev, start := range events {
		for name, call := range calls {
			t.Run(ev+"/"+name, func(t *testing.T) {
				var once sync.Once
				var fired atomic.Bool
				var mu sync.Mutex
				var q *queue.Queue
				done := make(chan error, 1)
				h := funcHandler{func(r slog.Record) {
					if !strings.Contains(r.Message, ev) {
						return
					}
					mu.Lock()
					qq := q
					mu.Unlock()
					if qq == nil {
						return
					}
					once.Do(func() { fired.Store(true); done <- call(qq) })
				}}
				qq := start(t, h, func(qq *queue.Queue) {
					mu.Lock()
					q = qq
					mu.Unlock()
				})
				// More writes, for an event logged again on them.
				for i := 0; i < 100 && !fired.Load(); i++ {
					_, _ = qq.Enqueue(context.Background(), make([]byte, 1000))
					time.Sleep(10 * time.Millisecond)
				}
				select {
				case err := <-done:
					t.Logf("%s from the handler of %q: %v", name, ev, err)
				case <-time.After(15 * time.Second):
					t.Fatalf("%s from the handler of %q has not returned in 15 s", name, ev)
				}
				closed := make(chan error, 1)
				go func() { closed <- qq.Close() }()
				select {
				case <-closed:
				case <-time.After(15 * time.Second):
					t.Fatal("Close hangs")
				}
			})
		}
	}
}

package queue_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// statsHandler is a log handler that, like one which adds the queue's
// figures to every line, reads the queue's Stats for each record it
// handles.
type statsHandler struct {
	q       atomic.Pointer[queue.Queue]
	handled atomic.Int64
}

func (h *statsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *statsHandler) Handle(context.Context, slog.Record) error {
	if q := h.q.Load(); q != nil {
		_ = q.Stats()
		h.handled.Add(1)
	}
	return nil
}
func (h *statsHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *statsHandler) WithGroup(string) slog.Handler      { return h }

// A Logger whose handler calls back into the queue does not hang the
// call that logged: every event is logged with the queue's lock released.
func TestLoggerMayCallTheQueue(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, q *queue.Queue)
	}{
		{"dead-letter", func(t *testing.T, q *queue.Queue) {
			enqueue(t, q, "a")
			require.NoError(t, tryDequeue(t, q).DeadLetter("bad"))
		}},
		{"nack past MaxDeliveries", func(t *testing.T, q *queue.Queue) {
			enqueue(t, q, "a")
			require.NoError(t, tryDequeue(t, q).Nack(0))
			require.NoError(t, tryDequeue(t, q).Nack(0))
		}},
		{"settle", func(t *testing.T, q *queue.Queue) {
			enqueue(t, q, "a")
			m := tryDequeue(t, q)
			require.NoError(t, q.Settle(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "bad"}))
		}},
		{"async", func(t *testing.T, q *queue.Queue) {
			enqueue(t, q, "a")
			m := tryDequeue(t, q)
			p, err := q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "bad"})
			require.NoError(t, err)
			require.NoError(t, p.Wait(context.Background()))
		}},
		{"by id", func(t *testing.T, q *queue.Queue) {
			id := enqueue(t, q, "a")
			tryDequeue(t, q)
			require.NoError(t, q.DeadLetterID(id, "bad"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &statsHandler{}
			q := open(t, t.TempDir(), &queue.Options{MaxDeliveries: 2, Logger: slog.New(h), ManualRequeue: true})
			h.q.Store(q)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.run(t, q)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				// Close would hang as well: the queue is left open.
				t.Fatal("the call that logged hangs: its log handler could not take the queue's lock")
			}
			require.Positive(t, h.handled.Load(), "the event was logged")
			require.NoError(t, q.Close())
		})
	}
}

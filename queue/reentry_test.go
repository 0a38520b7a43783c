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

// leaseNew enqueues a message and leases it, for a call made from a
// goroutine of the test, which must not stop the test itself.
func leaseNew(q *queue.Queue) (string, *queue.Message, error) {
	id, err := q.Enqueue(context.Background(), []byte("a"))
	if err != nil {
		return "", nil, err
	}
	m, err := q.TryDequeue()
	return id, m, err
}

// A Logger whose handler calls back into the queue does not hang the
// call that logged: every event is logged with the queue's lock released.
func TestLoggerMayCallTheQueue(t *testing.T) {
	cases := []struct {
		name string
		run  func(q *queue.Queue) error // runs on a goroutine of its own
	}{
		{"dead-letter", func(q *queue.Queue) error {
			_, m, err := leaseNew(q)
			if err != nil {
				return err
			}
			return m.DeadLetter("bad")
		}},
		{"nack past MaxDeliveries", func(q *queue.Queue) error {
			_, m, err := leaseNew(q)
			if err != nil {
				return err
			}
			if err := m.Nack(0); err != nil {
				return err
			}
			if m, err = q.TryDequeue(); err != nil {
				return err
			}
			return m.Nack(0)
		}},
		{"settle", func(q *queue.Queue) error {
			_, m, err := leaseNew(q)
			if err != nil {
				return err
			}
			return q.Settle(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "bad"})
		}},
		{"async", func(q *queue.Queue) error {
			_, m, err := leaseNew(q)
			if err != nil {
				return err
			}
			p, err := q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "bad"})
			if err != nil {
				return err
			}
			return p.Wait(context.Background())
		}},
		{"by id", func(q *queue.Queue) error {
			id, _, err := leaseNew(q)
			if err != nil {
				return err
			}
			return q.DeadLetterID(id, "bad")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &statsHandler{}
			q := open(t, t.TempDir(), &queue.Options{MaxDeliveries: 2, Logger: slog.New(h), ManualRequeue: true})
			h.q.Store(q)
			done := make(chan error, 1)
			go func() { done <- c.run(q) }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				// Close would hang as well: the queue is left open.
				t.Fatal("the call that logged hangs: its log handler could not take the queue's lock")
			}
			require.Positive(t, h.handled.Load(), "the event was logged")
			require.Equal(t, int64(1), q.Stats().Dead, "the message is dead")
			require.NoError(t, q.Close())
		})
	}
}

// A Logger whose handler calls back into the queue does not hang a
// delivery that MaxDeliveries kept from a ready message, nor the
// housekeeper that logs the dead-lettering: it is logged with the queue's
// lock released.
func TestLoggerMayCallTheQueueAtLimit(t *testing.T) {
	dir := poisonAtLimit(t, true)
	h := &statsHandler{}
	q := open(t, dir, &queue.Options{MaxDeliveries: 3, Logger: slog.New(h), ManualRequeue: true})
	h.q.Store(q)
	done := make(chan error, 1)
	go func() {
		_, err := q.TryDequeue()
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		// Close would hang as well: the queue is left open.
		t.Fatal("the delivery that dead-lettered hangs")
	}
	// The housekeeper logs it once durable, after the delivery returned.
	require.Eventually(t, func() bool { return h.handled.Load() > 0 }, 10*time.Second, time.Millisecond,
		"the dead-lettering was not logged: its log handler could not take the queue's lock")
	require.Equal(t, int64(1), q.Stats().Dead, "the message is dead")
	require.NoError(t, q.Close())
}

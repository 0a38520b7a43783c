package queue_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// funcHandler is a log handler that calls fn for each record.
type funcHandler struct{ fn func(slog.Record) }

func (h funcHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h funcHandler) Handle(_ context.Context, r slog.Record) error { h.fn(r); return nil }
func (h funcHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h funcHandler) WithGroup(string) slog.Handler                 { return h }

// A Logger's handler that, told of leases that ran out, waits in a
// Dequeue for a lease to run out waits until its context ends or Close,
// as Options.Logger says: the housekeeper that logged the event is the one
// that ends leases, and ends none while its handler runs. Close ends the
// wait with ErrClosed, and returns.
func TestLoggerWaitOnHousekeeper(t *testing.T) {
	var once sync.Once
	got := make(chan error, 1)
	var q *queue.Queue
	h := funcHandler{func(r slog.Record) {
		if r.Message != "queue: leases ran out" {
			return
		}
		once.Do(func() {
			if _, err := q.TryDequeue(); err != nil { // the message whose lease ran out, leased again
				got <- err
				return
			}
			_, err := q.Dequeue(context.Background()) // ready again once that lease runs out (100ms)
			got <- err
		})
	}}
	q = open(t, t.TempDir(), &queue.Options{AckTimeout: 100 * time.Millisecond, Logger: slog.New(h)})
	_, err := q.Enqueue(context.Background(), []byte("a"))
	require.NoError(t, err)
	_, err = q.TryDequeue()
	require.NoError(t, err)
	select {
	case err := <-got:
		t.Fatalf("the handler's Dequeue returned before Close: %v", err)
	case <-time.After(time.Second): // ten times the lease: no lease ran out meanwhile
	}
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	select {
	case err := <-got:
		require.ErrorIs(t, err, queue.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the handler's Dequeue")
	}
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
}

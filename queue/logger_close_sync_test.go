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

// A Logger's handler that calls Close on the goroutine that logged a
// background event, which Options.Logger forbids, is refused at once
// rather than left waiting for the goroutine it runs on; the queue stays
// open, and a Close from elsewhere closes it.
func TestLoggerCloseOnHousekeeperRefused(t *testing.T) {
	var once sync.Once
	got := make(chan error, 1)
	var mu sync.Mutex
	var q *queue.Queue
	h := funcHandler{func(r slog.Record) {
		if r.Message != "queue: leases ran out" {
			return
		}
		mu.Lock()
		qq := q
		mu.Unlock()
		once.Do(func() { got <- qq.Close() })
	}}
	qq := open(t, t.TempDir(), &queue.Options{AckTimeout: 50 * time.Millisecond, Logger: slog.New(h)})
	mu.Lock()
	q = qq
	mu.Unlock()
	enqueue(t, qq, "a")
	tryDequeue(t, qq)
	select {
	case err := <-got:
		require.ErrorIs(t, err, queue.ErrHousekeeper, "Close on the housekeeping goroutine cannot wait for it")
	case <-time.After(10 * time.Second):
		t.Fatal("Close from the handler of a background event has not returned in 10 s: it waits for the goroutine it runs on")
	}
	m := tryDequeue(t, qq) // the queue is still open
	require.NoError(t, m.Ack())
	_, err := qq.Enqueue(context.Background(), []byte("b"))
	require.NoError(t, err)
	require.NoError(t, qq.Close())
}

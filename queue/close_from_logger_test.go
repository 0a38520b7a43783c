package queue_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// closingHandler closes the queue, on a goroutine of its own as
// Options.Logger says, when the log says it refuses writes.
type closingHandler struct {
	q      atomic.Pointer[queue.Queue]
	closed chan error
}

func (h *closingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *closingHandler) Handle(_ context.Context, r slog.Record) error {
	if q := h.q.Load(); q != nil && strings.Contains(r.Message, "refuses writes") {
		go func() { h.closed <- q.Close() }()
	}
	return nil
}
func (h *closingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *closingHandler) WithGroup(string) slog.Handler      { return h }

// TestCloseFromLogHandler: a handler that closes the queue on the log's
// sticky write error, which the housekeeper logs, gets Close's answer (the
// error that poisoned the log) when it starts Close on a goroutine of its
// own, the way Options.Logger says.
func TestCloseFromLogHandler(t *testing.T) {
	fsys := faultfs.New(0)
	h := &closingHandler{closed: make(chan error, 1)}
	q, err := queue.Open(t.TempDir(), &queue.Options{FS: fsys, Logger: slog.New(h), AckTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	h.q.Store(q)
	_, err = q.Enqueue(context.Background(), []byte("leased"))
	require.NoError(t, err)
	_, err = q.TryDequeue() // its deadline wakes the housekeeper
	require.NoError(t, err)
	fsys.FailNext(wal.StoreWriteBatch)
	_, err = q.Enqueue(context.Background(), []byte("its write fails"))
	require.ErrorIs(t, err, faultfs.ErrInjected)
	select {
	case err := <-h.closed:
		require.ErrorIs(t, err, faultfs.ErrInjected)
	case <-time.After(10 * time.Second):
		t.Fatal("Close started by the Logger's handler on the sticky write error has not returned in 10 s")
	}
}

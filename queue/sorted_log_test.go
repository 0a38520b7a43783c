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

// deadLogHandler keeps the dead-letterings logged, reading the queue's
// Stats for each record, as a handler that adds the queue's figures to
// every line would.
type deadLogHandler struct {
	mu    sync.Mutex
	stats func() queue.Stats
	dead  []map[string]any // the attributes of each dead-lettering logged
	two   chan struct{}    // when set, closed once two are logged
}

func (h *deadLogHandler) setStats(f func() queue.Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats = f
}

func (h *deadLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *deadLogHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stats != nil {
		_ = h.stats()
	}
	if r.Message == "queue: value dead-lettered" {
		attrs := map[string]any{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
		h.dead = append(h.dead, attrs)
		if len(h.dead) == 2 && h.two != nil {
			close(h.two)
		}
	}
	return nil
}
func (h *deadLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *deadLogHandler) WithGroup(string) slog.Handler      { return h }

func (h *deadLogHandler) logged() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dead
}

// A sorted queue logs each value it dead-letters, as the ack queue logs
// each message: a consumer's batch dead-letter, a nack past MaxDeliveries,
// and a pull that MaxDeliveries keeps from a value (that one from the
// housekeeping goroutine, once durable, after the pull returned). It logs
// with the queue's lock released: a handler that calls the queue does not
// hang it.
func TestSortedDeadLetteringIsLogged(t *testing.T) {
	cases := []struct {
		name   string
		limit  int                          // MaxDeliveries of the open that dead-letters
		before func(s *queue.Sorted[int64]) // on a queue without a limit, closed after
		run    func(s *queue.Sorted[int64]) error
		reason string
	}{
		{"batch dead-letter", 0, nil, func(s *queue.Sorted[int64]) error {
			bs, err := s.TryPull(10)
			if err != nil {
				return err
			}
			return bs[0].DeadLetter("bad input")
		}, "bad input"},
		{"nack past MaxDeliveries", 1, nil, func(s *queue.Sorted[int64]) error {
			bs, err := s.TryPull(10)
			if err != nil {
				return err
			}
			return bs[0].Nack(0)
		}, "1 deliveries; last: nacked"},
		{"pull at MaxDeliveries", 1, func(s *queue.Sorted[int64]) {
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			require.NoError(t, bs[0].Nack(0))
		}, func(s *queue.Sorted[int64]) error {
			_, err := s.TryPull(10)
			return err
		}, "1 deliveries, limit 1; not delivered again"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := queue.OpenSorted[int64](dir, nil)
			require.NoError(t, err)
			require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("a")))
			require.NoError(t, s.Publish(context.Background(), 2, "k", []byte("b")))
			if c.before != nil {
				c.before(s)
			}
			require.NoError(t, s.Close())
			h := &deadLogHandler{two: make(chan struct{})}
			s, err = queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{
				MaxDeliveries: c.limit, Logger: slog.New(h)}})
			require.NoError(t, err)
			h.mu.Lock()
			h.stats = s.Stats
			h.mu.Unlock()
			done := make(chan error, 1)
			go func() { done <- c.run(s) }()
			select {
			case err := <-done:
				if c.name == "pull at MaxDeliveries" {
					require.ErrorIs(t, err, queue.ErrEmpty)
				} else {
					require.NoError(t, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call that logged hangs: its log handler could not take the queue's lock")
			}
			waitTwoLogged(t, h) // a pull's are logged by the housekeeper, after it returned
			logged := h.logged()
			require.Len(t, logged, 2, "one line per value dead-lettered")
			for _, a := range logged {
				require.Equal(t, "k", a["key"])
				require.Equal(t, c.reason, a["reason"])
				require.Contains(t, a, "seq")
			}
			require.NoError(t, s.Close())
		})
	}
}

// A blocking Pull that MaxDeliveries keeps from every value dead-letters
// and logs them before it waits for another value, and a windowed queue
// logs as a sorted one does.
func TestSortedDeadLetteringIsLoggedByPullAndWindowed(t *testing.T) {
	const reason = "1 deliveries, limit 1; not delivered again"
	t.Run("blocking Pull", func(t *testing.T) {
		dir := t.TempDir()
		s, err := queue.OpenSorted[int64](dir, nil)
		require.NoError(t, err)
		nackedOnce(t, s.Publish, s.TryPull, int64(1), int64(2))
		require.NoError(t, s.Close())
		h := &deadLogHandler{two: make(chan struct{})}
		s, err = queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{
			MaxDeliveries: 1, Logger: slog.New(h)}})
		require.NoError(t, err)
		defer s.Close()
		h.setStats(s.Stats)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := s.Pull(ctx, 10); done <- err }()
		select {
		case <-h.two: // logged while Pull waits for a value
		case err := <-done:
			t.Fatalf("Pull returned %v before it logged", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the blocking Pull logged no dead-lettering")
		}
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		requireDeadLogged(t, h, reason)
	})
	t.Run("windowed", func(t *testing.T) {
		dir := t.TempDir()
		o := &queue.WindowOptions{Window: time.Nanosecond}
		w, err := queue.OpenWindowed(dir, o)
		require.NoError(t, err)
		publish := func(ctx context.Context, _ time.Time, key string, p []byte) error { return w.Publish(ctx, key, p) }
		nackedOnce(t, publish, w.TryPull, time.Time{}, time.Time{})
		require.NoError(t, w.Close())
		h := &deadLogHandler{two: make(chan struct{})}
		o.MaxDeliveries, o.Logger = 1, slog.New(h)
		w, err = queue.OpenWindowed(dir, o)
		require.NoError(t, err)
		defer w.Close()
		h.setStats(w.Stats)
		_, err = w.TryPull(10)
		require.ErrorIs(t, err, queue.ErrEmpty)
		waitTwoLogged(t, h)
		requireDeadLogged(t, h, reason)
	})
}

// waitTwoLogged waits until h logged two dead-letterings.
func waitTwoLogged(t *testing.T, h *deadLogHandler) {
	t.Helper()
	select {
	case <-h.two:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d dead-letterings logged in 10 s, want 2", len(h.logged()))
	}
}

// nackedOnce publishes two values under key k and nacks their batch once.
func nackedOnce[K queue.SortKey](t *testing.T, publish func(context.Context, K, string, []byte) error,
	pull func(int) ([]*queue.Batch[K], error), a, b K) {
	t.Helper()
	require.NoError(t, publish(context.Background(), a, "k", []byte("a")))
	require.NoError(t, publish(context.Background(), b, "k", []byte("b")))
	bs, err := pull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].Nack(0))
}

// requireDeadLogged requires one line for each of k's two values.
func requireDeadLogged(t *testing.T, h *deadLogHandler, reason string) {
	t.Helper()
	logged := h.logged()
	require.Len(t, logged, 2, "one line per value dead-lettered")
	for _, a := range logged {
		require.Equal(t, "k", a["key"])
		require.Equal(t, reason, a["reason"])
	}
}

package redisq_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// syncBuffer is a log sink the housekeeper writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// has tells whether a line with the message msg was logged (JSON).
func (s *syncBuffer) has(msg string) bool {
	return s.contains(`"msg":"` + msg + `"`)
}

func (s *syncBuffer) contains(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.b.String(), text)
}

// The housekeeper logs the leases it ended, a failure while the server is
// down (once) and its recovery when the server is back.
func TestLoggerBackgroundEvents(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "logged", &redisq.Options{AckTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("left unacked"))
	require.NoError(t, err)
	_, err = q.TryDequeue()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return logs.has("redisq: leases ran out") }, 10*time.Second, 20*time.Millisecond)

	// A delayed message gives the housekeeper a deadline to wake for.
	_, err = q.Enqueue(ctx, []byte("later"), queue.WithDelay(300*time.Millisecond))
	require.NoError(t, err)
	srv.Kill()
	require.Eventually(t, func() bool { return logs.has("redisq: housekeeping failed; retrying every second") },
		40*time.Second, 50*time.Millisecond)
	srv.Restart()
	require.Eventually(t, func() bool { return logs.has("redisq: housekeeping works again") }, 40*time.Second, 50*time.Millisecond)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "left unacked", string(m.Payload))
}

// count tells how many lines with the message msg were logged (JSON).
func (s *syncBuffer) count(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), `"msg":"`+msg+`"`)
}

// A housekeeper whose passes fall short of Replicas (ErrNotDurable) does
// its work: that is logged once, as its own condition, and a failure
// that follows (the server down) is still logged as one, and its end as
// a recovery.
func TestLoggerNotDurableThenFailure(t *testing.T) {
	srv := redistest.Start(t) // no replica: every pass falls short
	var logs syncBuffer
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "logged-nd", &redisq.Options{Replicas: 1, WaitTimeout: 20 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	defer q.Close()
	const short = "redisq: housekeeping done, not acknowledged by enough replicas"
	require.Eventually(t, func() bool { return logs.has(short) }, 10*time.Second, 20*time.Millisecond)

	// A delayed message gives the housekeeper a deadline to wake for.
	_, err = q.Enqueue(ctx, []byte("later"), queue.WithDelay(300*time.Millisecond))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	srv.Kill()
	require.Eventually(t, func() bool { return logs.has("redisq: housekeeping failed; retrying every second") },
		20*time.Second, 50*time.Millisecond, "a failure after a pass that fell short must be logged")
	require.False(t, logs.has("redisq: housekeeping works again"), "nothing recovered before the failure")
	srv.Restart()
	require.Eventually(t, func() bool { return logs.has("redisq: housekeeping works again") }, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, logs.count(short), "falling short of Replicas is logged once while it lasts")
}

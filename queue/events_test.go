package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/recovery"
)

// logBuffer collects a queue's JSON log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged records whose message contains msg.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if strings.Contains(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}

func newLogger(level slog.Level) (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level})), b
}

// A snapshot that cannot be written is retried with backoff until it can,
// without waiting for more writes; the failure is in Stats and in the log
// until a later attempt succeeds.
func TestBackgroundSnapshotFailureIsRetriedKeptAndLogged(t *testing.T) {
	dir := t.TempDir()
	logger, logs := newLogger(slog.LevelInfo)
	q := open(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 4096, ManualRequeue: true, Logger: logger})
	defer q.Close()
	next := q.Stats().LastLSN + 1
	// A non-empty directory where the snapshot's temporary file goes makes
	// its creation fail (also for root, which file modes do not stop).
	blocker := filepath.Join(dir, recovery.Name(next)+".tmp")
	require.NoError(t, os.MkdirAll(filepath.Join(blocker, "x"), 0o700))

	enqueue(t, q, strings.Repeat("p", 5000)) // past SnapshotBytes: the housekeeper compacts
	require.Eventually(t, func() bool { return q.Stats().BackgroundErr != nil }, 30*time.Second, 5*time.Millisecond)
	st := q.Stats()
	assert.Contains(t, st.BackgroundErr.Error(), "snapshot")
	assert.False(t, st.BackgroundErrAt.IsZero())
	assert.GreaterOrEqual(t, st.BackgroundErrors, uint64(1))
	assert.Zero(t, st.SnapshotLSN, "no snapshot was written")
	// The attempt's outcome is recorded, then logged: the line may come a
	// moment after Stats shows the error.
	var failed []map[string]any
	require.Eventually(t, func() bool {
		failed = logs.lines(t, "background compaction failed")
		return len(failed) > 0
	}, 30*time.Second, 5*time.Millisecond)
	assert.Equal(t, "ERROR", failed[0]["level"])
	assert.Contains(t, failed[0]["err"], "snapshot")

	require.NoError(t, os.RemoveAll(blocker))
	require.Eventually(t, func() bool { return q.Stats().SnapshotLSN == next }, 30*time.Second, 5*time.Millisecond,
		"the failed snapshot is retried without further writes")
	require.Eventually(t, func() bool { return q.Stats().BackgroundErr == nil }, 30*time.Second, 5*time.Millisecond)
	st = q.Stats()
	assert.GreaterOrEqual(t, st.BackgroundErrors, uint64(1), "the count of failures stays")
	assert.False(t, st.BackgroundErrAt.IsZero(), "the time of the last failure stays")
	require.Eventually(t, func() bool { return len(logs.lines(t, "background compaction succeeded again")) == 1 },
		30*time.Second, 5*time.Millisecond)
}

// Open, dead-lettering and leases that run out are logged at Info; a
// queue in steady state logs nothing at Info.
func TestEventsAreLogged(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	logger, logs := newLogger(slog.LevelInfo)
	q := open(t, dir, &queue.Options{Clock: clock, AckTimeout: time.Second, MaxDeliveries: 2, Logger: logger})
	opened := logs.lines(t, "queue: opened")
	require.Len(t, opened, 1)
	assert.Equal(t, "INFO", opened[0]["level"])

	for i := 0; i < 50; i++ {
		m := tryDequeueAfter(t, q, "steady")
		require.NoError(t, m.Ack())
	}
	assert.Len(t, logs.lines(t, ""), 1, "steady state logs nothing at Info past Open")

	id := enqueue(t, q, "doomed")
	m := tryDequeue(t, q)
	require.NoError(t, m.DeadLetter("bad input"))
	dead := logs.lines(t, "dead-lettered")
	require.Len(t, dead, 1)
	assert.Equal(t, id, dead[0]["id"])
	assert.Equal(t, "bad input", dead[0]["reason"])

	enqueue(t, q, "slow")
	tryDequeue(t, q)
	clock.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return len(logs.lines(t, "leases ran out")) == 1 }, 30*time.Second, time.Millisecond)
	assert.Equal(t, 1.0, logs.lines(t, "leases ran out")[0]["leases"])
	require.NoError(t, q.Close())

	// A crash leaves a lease behind: the next Open warns that it requeued it.
	q = open(t, dir, &queue.Options{Clock: clock, Logger: logger})
	tryDequeue(t, q)
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	q = open(t, img, &queue.Options{Clock: clock, Logger: logger})
	defer q.Close()
	opened = logs.lines(t, "queue: opened")
	require.Len(t, opened, 3)
	assert.Equal(t, "WARN", opened[2]["level"])
	assert.Equal(t, 1.0, opened[2]["requeued"])
}

func tryDequeueAfter(t *testing.T, q *queue.Queue, payload string) *queue.Message {
	t.Helper()
	enqueue(t, q, payload)
	return tryDequeue(t, q)
}

func TestMetricsCountWhatHappened(t *testing.T) {
	clock := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clock, MaxDeliveries: 3})
	defer q.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		enqueue(t, q, "m")
	}
	clock.Advance(1500 * time.Millisecond)
	a := tryDequeue(t, q)
	require.NoError(t, a.Ack())
	b := tryDequeue(t, q)
	require.NoError(t, b.Nack(0))
	b = tryDequeue(t, q)
	require.Equal(t, 2, b.Deliveries)
	require.NoError(t, b.DeadLetter("no"))
	_, err := q.Enqueue(ctx, []byte("later"), queue.WithDelay(time.Hour))
	require.NoError(t, err)

	m := q.Metrics()
	assert.Equal(t, uint64(4), m.Enqueued)
	assert.Equal(t, uint64(3), m.Delivered)
	assert.Equal(t, uint64(1), m.Redelivered)
	assert.Equal(t, uint64(1), m.Acked)
	assert.Equal(t, uint64(1), m.Nacked)
	assert.Equal(t, uint64(1), m.DeadLettered)
	assert.Equal(t, int64(1), m.Ready)
	assert.Equal(t, int64(1), m.Delayed)
	assert.Equal(t, int64(1), m.Dead)
	assert.Equal(t, 1500*time.Millisecond, m.OldestAge)
	assert.Positive(t, m.LogBytes)
	assert.Positive(t, m.LiveBytes)
	h := m.EnqueueToAckSeconds
	assert.Equal(t, uint64(1), h.Count)
	assert.InDelta(t, 1.5, h.Sum, 1e-9)
	assert.Equal(t, 2.048, h.Quantile(1), "1500 ms is in the bucket up to 2048 ms")
	// Every durable enqueue and ack above (SyncAlways) waited for an fsync
	// of the tail segment, each counted with the records it covered.
	fs, rs := m.FsyncSeconds, m.RecordsPerFsync
	assert.Positive(t, fs.Count, "fsyncs are measured")
	assert.Equal(t, fs.Count, rs.Count, "one records figure per fsync")
	assert.GreaterOrEqual(t, rs.Sum, float64(m.Enqueued+m.Acked), "the enqueues and the ack were fsynced")
	assert.Positive(t, fs.Sum)
}

// The counters are lifetime totals: a reopen keeps them, except
// Redelivered, which counts since Open.
func TestMetricsCountersKeptAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{MaxDeliveries: 2})
	for i := 0; i < 3; i++ {
		enqueue(t, q, "m")
	}
	a := tryDequeue(t, q)
	require.NoError(t, a.Ack())
	b := tryDequeue(t, q)
	require.NoError(t, b.Nack(0))
	b = tryDequeue(t, q)
	require.NoError(t, b.DeadLetter("no"))
	before := q.Metrics()
	require.Equal(t, uint64(1), before.Redelivered)
	require.NoError(t, q.Close())

	q = open(t, dir, nil)
	defer q.Close()
	after := q.Metrics()
	assert.Equal(t, uint64(3), after.Enqueued)
	assert.Equal(t, uint64(3), after.Delivered)
	assert.Equal(t, uint64(1), after.Acked)
	assert.Equal(t, uint64(1), after.Nacked)
	assert.Equal(t, uint64(1), after.DeadLettered)
	assert.Equal(t, uint64(0), after.Redelivered, "Redelivered counts since Open")
}

// Compactions are logged at Debug with their duration and the log bytes
// before and after; at Info they are not.
func TestCompactionIsLoggedAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			logger, logs := newLogger(level)
			q := open(t, t.TempDir(), &queue.Options{SegmentSize: 4096, SnapshotBytes: 4096, Logger: logger})
			defer q.Close()
			enqueue(t, q, strings.Repeat("p", 5000))
			require.Eventually(t, func() bool { return q.Stats().SnapshotLSN != 0 }, 30*time.Second, 5*time.Millisecond)
			require.Eventually(t, func() bool { return len(logs.lines(t, "queue: compacted")) > 0 || level == slog.LevelInfo },
				30*time.Second, 5*time.Millisecond)
			lines := logs.lines(t, "queue: compacted")
			if level == slog.LevelInfo {
				assert.Empty(t, lines)
				return
			}
			assert.Equal(t, "DEBUG", lines[0]["level"])
			assert.Contains(t, lines[0], "duration")
			assert.Contains(t, lines[0], "log_bytes_after")
			assert.Equal(t, float64(q.Stats().SnapshotLSN), lines[0]["snapshot_lsn"])
		})
	}
}

// A ready message that MaxDeliveries keeps from a delivery is logged as
// dead-lettered and counted as a settle's dead-letter is: by a delivery
// that returns the message behind it, and by a blocking one that found
// nothing else, before it waits.
func TestDeadLetterAtLimitIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name string
		next bool // a message behind the poison one
	}{{"delivery", true}, {"blocking delivery that waits", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := poisonAtLimit(t, tc.next)
			logger, logs := newLogger(slog.LevelInfo)
			q := open(t, dir, &queue.Options{MaxDeliveries: 3, ManualRequeue: true, Logger: logger})
			defer q.Close()
			got := make(chan *queue.Message, 1)
			go func() {
				m, err := q.Dequeue(context.Background())
				assert.NoError(t, err)
				got <- m
			}()
			require.Eventually(t, func() bool { return len(logs.lines(t, "dead-lettered")) == 1 },
				30*time.Second, time.Millisecond, "the dead-letter at the limit is not logged")
			dead := logs.lines(t, "dead-lettered")[0]
			assert.Equal(t, "poison", dead["id"])
			assert.Equal(t, 3.0, dead["deliveries"])
			assert.Equal(t, "3 deliveries, limit 3; not delivered again", dead["reason"])
			assert.Equal(t, uint64(1), q.Metrics().DeadLettered)
			if !tc.next {
				_, err := q.Enqueue(context.Background(), []byte("next"), queue.WithID("next"))
				require.NoError(t, err)
			}
			require.Equal(t, "next", (<-got).ID)
		})
	}
}

// poisonAtLimit returns a queue directory holding "poison", ready after 3
// deliveries, and, with next, "next" behind it, never delivered.
func poisonAtLimit(t *testing.T, next bool) string {
	t.Helper()
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{MaxDeliveries: 10, ManualRequeue: true})
	_, err := q.Enqueue(context.Background(), []byte("poison"), queue.WithID("poison"))
	require.NoError(t, err)
	if next {
		_, err = q.Enqueue(context.Background(), []byte("next"), queue.WithID("next"))
		require.NoError(t, err)
	}
	for range 3 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, "poison", m.ID)
		require.NoError(t, m.Nack(0))
	}
	require.NoError(t, q.Close())
	return dir
}

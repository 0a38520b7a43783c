package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// Regression tests for engine bugs the crash suite (fuzz/) found.

// TestAckedDelayedIsNotRedeliveredByCursor is a regression test found by the
// kill -9 suite (fuzz/kill9_test.go): a message enqueued with a delay, then
// delivered and acked before the log cursor reached its enqueue record, was
// delivered a second time when the cursor got there, live and after a
// crash.
func TestAckedDelayedIsNotRedeliveredByCursor(t *testing.T) {
	clock := newFakeClock()
	opts := &queue.Options{Clock: clock, ManualRequeue: true}
	dir := t.TempDir()
	q := open(t, dir, opts)
	defer q.Close()
	enqueue(t, q, "first")
	enqueue(t, q, "delayed", queue.WithDelay(time.Second))
	enqueue(t, q, "last")
	clock.Advance(2 * time.Second)

	m := tryDequeue(t, q)
	require.Equal(t, "delayed", string(m.Payload), "a due delayed message goes first")
	require.NoError(t, m.Ack())

	img := crashImage(t, dir)
	require.Equal(t, "first", string(tryDequeue(t, q).Payload))
	require.Equal(t, "last", string(tryDequeue(t, q).Payload), "the acked delayed message must not come back")
	requireEmpty(t, q)
	require.EqualValues(t, 0, q.Stats().Ready)

	q2 := open(t, img, opts)
	defer q2.Close()
	require.Equal(t, "first", string(tryDequeue(t, q2).Payload))
	require.Equal(t, "last", string(tryDequeue(t, q2).Payload), "nor after a crash")
	requireEmpty(t, q2)
}

// TestReadLogEndsWithNil is a regression test: ReadLog wrapped the nil
// error of a read that ended well, so it never returned nil.
func TestReadLogEndsWithNil(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	enqueue(t, q, "a")
	require.NoError(t, q.Close())
	n := 0
	require.NoError(t, queue.ReadLog(dir, 0, func(queue.Record) error { n++; return nil }))
	require.Positive(t, n)
}

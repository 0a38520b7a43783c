package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// openAfter opens dir for writing with opts on a goroutine and returns
// the channel that receives the queue (or the error) and when Open
// returned.
func openAfter(dir string, opts *queue.Options) <-chan openResult {
	done := make(chan openResult, 1)
	go func() {
		q, err := queue.Open(dir, opts)
		done <- openResult{q, err, time.Now()}
	}()
	return done
}

type openResult struct {
	q   *queue.Queue
	err error
	at  time.Time
}

// A service restarting while an operator's read-only handle holds an idle
// queue's lock shared opens once the handle closes, within its
// LockTimeout, and keeps what was enqueued before.
func TestLockTimeoutWaitsOutAReader(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("kept"))
	require.NoError(t, err)
	require.NoError(t, q.Close())

	ro, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	require.NoError(t, err)
	require.False(t, ro.InUse())
	done := openAfter(dir, &queue.Options{LockTimeout: time.Minute})
	select {
	case r := <-done:
		t.Fatalf("Open returned (%v) while the reader held the lock", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	closed := time.Now()
	require.NoError(t, ro.Close())

	r := <-done
	require.NoError(t, r.err, "Open after the reader closed, within LockTimeout")
	defer r.q.Close()
	require.False(t, r.at.Before(closed), "Open returned before the reader let go")
	m, err := r.q.Dequeue(ctx)
	require.NoError(t, err)
	require.Equal(t, "kept", string(m.Payload))
}

// A writer that closes the queue hands it over to an Open that waits for
// it: a new process started before the old one finished its Close. What
// the old one did while the new one waited (an ack, an enqueue) is kept.
func TestLockTimeoutWaitsOutAWriter(t *testing.T) {
	dir := t.TempDir()
	old := open(t, dir, nil)
	enqueue(t, old, "acked while waiting")
	enqueue(t, old, "handed over")

	done := openAfter(dir, &queue.Options{LockTimeout: time.Minute})
	select {
	case r := <-done:
		t.Fatalf("Open returned (%v) while another queue had the directory open", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	m := tryDequeue(t, old)
	require.Equal(t, "acked while waiting", string(m.Payload))
	require.NoError(t, m.Ack())
	enqueue(t, old, "enqueued while waiting")
	require.NoError(t, old.Close())
	r := <-done
	require.NoError(t, r.err)
	defer r.q.Close()
	for _, want := range []string{"handed over", "enqueued while waiting"} {
		require.Equal(t, want, string(tryDequeue(t, r.q).Payload))
	}
	requireEmpty(t, r.q)
}

// An Open whose LockTimeout runs out fails with ErrLocked, no sooner;
// without one it fails at once, and Repair waits as its Options say.
func TestLockTimeoutRunsOut(t *testing.T) {
	dir := t.TempDir()
	holder, err := queue.Open(dir, nil)
	require.NoError(t, err)
	defer holder.Close()

	const wait = 150 * time.Millisecond
	start := time.Now()
	_, err = queue.Open(dir, &queue.Options{LockTimeout: wait})
	took := time.Since(start)
	require.ErrorIs(t, err, queue.ErrLocked)
	require.ErrorContains(t, err, "waited 150ms", "the error says how long it waited")
	require.GreaterOrEqual(t, took, wait, "gave up before LockTimeout")

	start = time.Now()
	_, err = queue.Repair(dir, &queue.RepairOptions{Options: &queue.Options{LockTimeout: wait}})
	require.ErrorIs(t, err, queue.ErrLocked)
	require.GreaterOrEqual(t, time.Since(start), wait, "Repair gave up before LockTimeout")

	_, err = queue.Open(dir, nil)
	require.ErrorIs(t, err, queue.ErrLocked)
	_, err = queue.Open(dir, &queue.Options{LockTimeout: -time.Second})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
}

// A read-only open beside a writer never waits for LockTimeout: it reads
// beside the holder.
func TestLockTimeoutLeavesReadersAlone(t *testing.T) {
	dir := t.TempDir()
	holder, err := queue.Open(dir, nil)
	require.NoError(t, err)
	defer holder.Close()

	done := make(chan error, 1)
	go func() {
		ro, err := queue.Open(dir, &queue.Options{ReadOnly: true, LockTimeout: time.Hour})
		if err == nil {
			if !ro.InUse() {
				err = errors.New("read-only open beside a writer: InUse false")
			}
			ro.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("a read-only open beside a writer waited for the lock")
	}
}

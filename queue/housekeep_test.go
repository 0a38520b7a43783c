package queue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestReadsBesideCompaction lists dead letters and delivers messages that
// are nacked over and over, checking every payload, while compactions copy those very
// messages forward and truncate the segments they were in. A read must
// never fail and never return another message's bytes: it follows the
// copy, and waits for a copy that is appended but not yet written.
func TestReadsBesideCompaction(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096, MaxDeliveries: -1, ManualRequeue: true, Sync: queue.SyncNever})
	defer q.Close()
	const dead = 150
	payloadOf := func(i int) string { return fmt.Sprintf("dead-%d|%s", i, strings.Repeat("d", 40+i%50)) }
	for i := 0; i < dead; i++ {
		enqueue(t, q, payloadOf(i), queue.WithID(fmt.Sprintf("d%d", i)))
		require.NoError(t, tryDequeue(t, q).DeadLetter("test"))
	}
	// Messages that are nacked whenever they come out: ready again, in the
	// index, and copied forward by compactions while they cycle.
	bodyOf := func(id string) string { return id + "|" + strings.Repeat("n", 60+len(id)) }
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("n%d", i)
		enqueue(t, q, bodyOf(id), queue.WithID(id))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(2)
	go func() { // churn: the log grows, old segments hold only dead letters
		defer wg.Done()
		defer stop.Store(true)
		for i := 0; i < 40 && !stop.Load(); i++ {
			for j := 0; j < 30; j++ {
				id := fmt.Sprintf("c%d.%d", i, j)
				if _, err := q.Enqueue(context.Background(), []byte(bodyOf(id)), queue.WithID(id)); err != nil {
					errs <- err
					return
				}
				for k := 0; k < 2; k++ { // a nacked message, then (usually) this one
					if err := deliverChecked(q, bodyOf); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := q.Compact(); err != nil {
				errs <- fmt.Errorf("compact: %w", err)
				return
			}
		}
	}()
	go func() { // the reader
		defer wg.Done()
		for !stop.Load() {
			ds, err := q.DeadLetters(0, dead+10)
			if err != nil {
				errs <- fmt.Errorf("DeadLetters: %w", err)
				stop.Store(true)
				return
			}
			if len(ds) != dead {
				errs <- fmt.Errorf("DeadLetters returned %d letters, want %d", len(ds), dead)
				stop.Store(true)
				return
			}
			for _, d := range ds {
				var i int
				fmt.Sscanf(d.ID, "d%d", &i)
				if string(d.Payload) != payloadOf(i) {
					errs <- fmt.Errorf("dead letter %s has payload %q", d.ID, d.Payload)
					stop.Store(true)
					return
				}
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Greater(t, q.Stats().Moved, uint64(0), "compaction copied the dead letters forward")
}

// deliverChecked dequeues a message, checks that its payload is its own,
// and nacks it if its id starts with n (acks it otherwise).
func deliverChecked(q *queue.Queue, bodyOf func(string) string) error {
	m, err := q.TryDequeue()
	if err == queue.ErrEmpty {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dequeue: %w", err)
	}
	if string(m.Payload) != bodyOf(m.ID) {
		return fmt.Errorf("message %s delivered with payload %q", m.ID, m.Payload)
	}
	if strings.HasPrefix(m.ID, "n") {
		return m.Nack(0)
	}
	return m.Ack()
}

// TestCloseClosesEveryFile checks that after Close no file descriptor of
// the process points into the queue directory, even when compaction
// removed segments a reader had open.
func TestCloseClosesEveryFile(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Fatalf("this test counts /proc/self/fd entries: %v", err)
	}
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096, Sync: queue.SyncNever, MaxDeliveries: -1})
	// The cursor reads through every message and stays at the end of the
	// segment it read last; a large delayed message comes after it, so
	// that no compaction runs before Close, whose snapshot then removes
	// that segment.
	for i := 0; i < 50; i++ {
		enqueue(t, q, strings.Repeat("p", 100))
	}
	for i := 0; i < 50; i++ {
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	_, err := q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
	enqueue(t, q, strings.Repeat("big", 100<<10), queue.WithDelay(time.Hour))
	_, err = q.DeadLetters(0, 10)
	require.NoError(t, err)
	q.Stats()
	require.NoError(t, q.Close())
	require.Empty(t, openFilesUnder(t, dir))
	q = open(t, dir, nil) // and after a reopen too
	q.Stats()
	require.NoError(t, q.Close())
	require.Empty(t, openFilesUnder(t, dir))
}

// openFilesUnder lists the process's open files under dir.
func openFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			out = append(out, target)
		}
	}
	return out
}

package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// dueOptions have a SnapshotBytes far below SegmentSize: the writes of a
// test pass SnapshotBytes many times over and never a SegmentSize.
func dueOptions() queue.Options {
	return queue.Options{SegmentSize: 1 << 20, SnapshotBytes: 8 << 10, ManualRequeue: true,
		Sync: queue.SyncNever, AckTimeout: time.Hour}
}

// TestSnapshotAtSnapshotBytes writes a little more than SnapshotBytes, far
// less than SegmentSize, to each kind of queue, and requires a snapshot
// to follow without further writes: SnapshotBytes alone makes one due.
func TestSnapshotAtSnapshotBytes(t *testing.T) {
	payload := []byte(strings.Repeat("s", 1000))
	const writes = 12 // 12 KB: past SnapshotBytes (8 KiB), far from SegmentSize (1 MiB)
	cases := []struct {
		name string
		open func(t *testing.T) (write func(i int) error, stats func() queue.Stats, close func() error)
	}{
		{"ack", func(t *testing.T) (func(int) error, func() queue.Stats, func() error) {
			o := dueOptions()
			q, err := queue.Open(t.TempDir(), &o)
			require.NoError(t, err)
			write := func(int) error { _, err := q.Enqueue(context.Background(), payload); return err }
			return write, q.Stats, q.Close
		}},
		{"sorted", func(t *testing.T) (func(int) error, func() queue.Stats, func() error) {
			s, err := queue.OpenSorted[int](t.TempDir(), &queue.SortedOptions{Options: dueOptions()})
			require.NoError(t, err)
			write := func(i int) error { return s.Publish(context.Background(), i, fmt.Sprint("k", i%3), payload) }
			return write, s.Stats, s.Close
		}},
		{"windowed", func(t *testing.T) (func(int) error, func() queue.Stats, func() error) {
			w, err := queue.OpenWindowed(t.TempDir(),
				&queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: dueOptions()}, Window: time.Hour})
			require.NoError(t, err)
			write := func(i int) error { return w.Publish(context.Background(), fmt.Sprint("k", i%3), payload) }
			return write, w.Stats, w.Close
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write, stats, closeQ := c.open(t)
			defer closeQ()
			for i := 0; i < writes; i++ {
				require.NoError(t, write(i))
			}
			last := stats().LastLSN
			require.Eventually(t, func() bool { return stats().SnapshotLSN != 0 }, 30*time.Second, 5*time.Millisecond,
				"no snapshot after %d writes of %d-byte payloads with SnapshotBytes 8 KiB", writes, len(payload))
			require.LessOrEqual(t, stats().SnapshotLSN, last)
		})
	}
}

// TestSnapshotDueAgainAfterSlowOne holds a background snapshot's file
// write while more than SnapshotBytes are appended, then lets it finish:
// the next snapshot must follow without further writes, as those bytes
// already make one due.
func TestSnapshotDueAgainAfterSlowOne(t *testing.T) {
	o := dueOptions()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testhook.SetSnapshotStep(&o, func(step string) {
		if step == "written" {
			once.Do(func() { close(held); <-release })
		}
	})
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	var released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	defer letGo() // before Close, whose own snapshot would wait for it when none ran before
	payload := strings.Repeat("h", 1000)
	for i := 0; i < 9; i++ { // past SnapshotBytes: the first snapshot starts, and is held
		enqueue(t, q, payload)
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no snapshot started after SnapshotBytes were written")
	}
	for i := 0; i < 12; i++ { // SnapshotBytes more, while the snapshot is held
		enqueue(t, q, payload)
	}
	last := q.Stats().LastLSN
	letGo()
	require.Eventually(t, func() bool { return q.Stats().SnapshotLSN == last }, 30*time.Second, 5*time.Millisecond,
		"the bytes written during the first snapshot make another due")
}

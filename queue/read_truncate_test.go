package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// payloadOf is the payload of the message with id in
// TestReadsThroughCompactions: a reader can tell a right one from any
// other message's.
func payloadOf(id string) string { return id + ":" + strings.Repeat(id[len(id)-1:], 100) }

// TestReadsThroughCompactions: while producers and consumers keep a queue
// of small segments compacting as fast as SnapshotBytes fills (each
// compaction cutting the log's front and closing the removed segments'
// files as new segments are rolled), every read of a payload (a
// delivery's, through the cursor; Peek's of what Browse lists; a dead
// letter's; ReadLog's of the log beside the open queue) gives the right
// payload or, for Peek, ErrNotFound for a message gone meanwhile; no read
// fails otherwise. Once the queue is closed, the process holds as many
// files as before it was opened: no removed segment's handle is left open.
func TestReadsThroughCompactions(t *testing.T) {
	dir := t.TempDir()
	before := openFiles(t)
	fsys := &handleCountFS{}
	q := open(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 4096, Sync: queue.SyncNever, FS: fsys})
	n := 600
	if raceEnabled {
		n = 200
	}
	errs := make(chan error, 16)
	ctx, stop := context.WithCancel(context.Background()) // a failure stops every goroutine
	defer stop()
	fail := func(err error) {
		stop()
		select {
		case errs <- err:
		default:
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer
		defer wg.Done()
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			if _, err := q.Enqueue(ctx, []byte(payloadOf(id)), queue.WithID(id)); err != nil {
				fail(fmt.Errorf("Enqueue %s: %w", id, err))
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // the consumer: every tenth message dead-lettered, the rest acked
		defer wg.Done()
		defer close(done)
		for got := 0; got < n; got++ {
			m, err := q.Dequeue(ctx)
			if err == nil && string(m.Payload) != payloadOf(m.ID) {
				err = fmt.Errorf("delivered %s with payload %.20q", m.ID, m.Payload)
			}
			if err == nil && got%10 == 0 {
				err = m.DeadLetter("tenth")
			} else if err == nil {
				err = m.Ack()
			}
			if err != nil {
				fail(fmt.Errorf("consumer at %d: %w", got, err))
				return
			}
		}
	}()
	for _, read := range []func() error{
		func() error { return browsePeek(q) },
		func() error { return deadPayloads(q) },
		func() error { return readLogPayloads(dir) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !isClosed(done) && ctx.Err() == nil {
				if err := read(); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.NoError(t, q.Close())
	require.Zero(t, fsys.open.Load(), "read-only handles left open once the queue was closed")
	require.Equal(t, before, openFiles(t), "files open before the queue was opened, and after it was closed")
}

// browsePeek Peeks every message Browse lists as ready and checks its
// payload.
func browsePeek(q *queue.Queue) error {
	ms, err := q.Browse(queue.StateReady, 0, 50)
	if err != nil {
		return fmt.Errorf("Browse: %w", err)
	}
	for _, m := range ms {
		p, err := q.Peek(m.Seq)
		if errors.Is(err, queue.ErrNotFound) {
			continue // acked and compacted away meanwhile
		}
		if err != nil {
			return fmt.Errorf("Peek(%d): %w", m.Seq, err)
		}
		if p.ID != m.ID || string(p.Payload) != payloadOf(m.ID) {
			return fmt.Errorf("Peek(%d) of %s: %s with %.20q", m.Seq, m.ID, p.ID, p.Payload)
		}
	}
	return nil
}

// deadPayloads checks the payload of every dead letter.
func deadPayloads(q *queue.Queue) error {
	ds, err := q.DeadLetters(0, 0)
	if err != nil {
		return fmt.Errorf("DeadLetters: %w", err)
	}
	for _, d := range ds {
		if string(d.Payload) != payloadOf(d.ID) {
			return fmt.Errorf("dead letter %s (seq %d) with payload %.20q", d.ID, d.Seq, d.Payload)
		}
	}
	return nil
}

// readLogPayloads reads the log with ReadLog beside the open queue and
// checks the payload of every record that carries one.
func readLogPayloads(dir string) error {
	return queue.ReadLog(dir, 0, func(r queue.Record) error {
		if r.ID != "" && r.Payload != nil && string(r.Payload) != payloadOf(r.ID) {
			return fmt.Errorf("ReadLog: %s record %d of %s with payload %.20q", r.Op, r.LSN, r.ID, r.Payload)
		}
		return nil
	})
}

// handleCountFS is the real file system counting the read-only handles
// open through it.
type handleCountFS struct {
	wal.OSFS
	open atomic.Int64 // read-only handles opened and not closed
}

// Open opens name read-only through the real file system and counts the
// handle until it is closed.
func (f *handleCountFS) Open(name string) (wal.File, error) {
	file, err := f.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	f.open.Add(1)
	return &countedHandle{File: file, fs: f}, nil
}

// countedHandle is a read-only handle of a handleCountFS.
type countedHandle struct {
	wal.File
	fs     *handleCountFS
	closed atomic.Bool // set by the first Close
}

// Close closes the handle, uncounting it the first time.
func (h *countedHandle) Close() error {
	if !h.closed.Swap(true) {
		h.fs.open.Add(-1)
	}
	return h.File.Close()
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

package queue

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/wal"
)

// TestRequeueExpiredWakesAtFirstChunk: RequeueExpired ends many leases a
// chunk at a time. A consumer asleep in Dequeue is woken once the first
// chunk's records are fsynced (SyncAlways), the messages they made ready
// being deliverable then: before the fsync of the next chunk, not after
// the last one.
func TestRequeueExpiredWakesAtFirstChunk(t *testing.T) {
	const leases = 2*requeueChunk + 10
	clk := fakeclock.New()
	gate := &syncGate{}
	q, err := Open(t.TempDir(), &Options{Clock: clk, ManualRequeue: true, FS: gate})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	items := make([]Item, leases)
	for i := range items {
		items[i].Payload = []byte("m")
	}
	_, err = q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, leases)
	require.NoError(t, err)
	require.Len(t, ms, leases)

	looks := 0
	var woken <-chan struct{} // what the consumer sleeps on
	asleep := make(chan struct{})
	q.foundNothing = func() { // under q.mu
		if looks++; looks == dequeueSleeper.looks {
			woken = q.mu.changed
			close(asleep)
		}
	}
	got := make(chan *Message, 1)
	go func() {
		m, err := q.Dequeue(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	select {
	case <-asleep:
	case <-time.After(hangBound):
		t.Fatal("the consumer never slept")
	}

	clk.Advance(time.Hour)
	firstChunk := q.log.LastLSN() + requeueChunk // the last LSN of the first chunk's records
	gate.holdWhen(func() bool { return q.log.DurableLSN() >= firstChunk })
	type result struct {
		n   int
		err error
	}
	requeued := make(chan result, 1)
	go func() {
		n, err := q.RequeueExpired()
		requeued <- result{n, err}
	}()
	select {
	case <-gate.held: // the first chunk is fsynced; the next one's fsync waits
	case r := <-requeued:
		t.Fatalf("RequeueExpired returned (%d, %v) without a second fsync", r.n, r.err)
	}
	wokenThen := false
	select {
	case <-woken:
		wokenThen = true
	default:
	}
	gate.release()
	r := <-requeued
	require.NoError(t, r.err)
	require.Equal(t, leases, r.n)
	m := <-got
	require.NotNil(t, m)
	require.True(t, wokenThen, "the consumer asleep was still asleep once the first %d lease ends were fsynced", requeueChunk)
}

// syncGate is the real file system, but it can hold one fsync of a log
// segment until the test releases it.
type syncGate struct {
	wal.OSFS
	mu    sync.Mutex
	when  func() bool   // the first fsync for which it reports true is held; nil: none
	held  chan struct{} // closed once that fsync waits
	freed chan struct{} // closed to let it go on
}

// holdWhen makes the first fsync of a segment for which when reports
// true wait until release.
func (g *syncGate) holdWhen(when func() bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.when, g.held, g.freed = when, make(chan struct{}), make(chan struct{})
}

func (g *syncGate) release() { close(g.freed) }

// wait holds an fsync if it is the one to hold.
func (g *syncGate) wait() {
	g.mu.Lock()
	when, held, freed := g.when, g.held, g.freed
	hold := when != nil && when()
	if hold {
		g.when = nil
	}
	g.mu.Unlock()
	if hold {
		close(held)
		<-freed
	}
}

func (g *syncGate) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := g.OSFS.OpenFile(name, flag, perm)
	return g.wrap(name, f, err)
}

func (g *syncGate) Open(name string) (wal.File, error) {
	f, err := g.OSFS.Open(name)
	return g.wrap(name, f, err)
}

// wrap gates the fsyncs of f, opened as name, if it is a log segment.
func (g *syncGate) wrap(name string, f wal.File, err error) (wal.File, error) {
	if err != nil || filepath.Base(filepath.Dir(name)) != "log" {
		return f, err
	}
	return syncGateFile{File: f, g: g}, nil
}

// syncGateFile is a segment file whose fsyncs the gate may hold.
type syncGateFile struct {
	wal.File
	g *syncGate
}

func (f syncGateFile) Sync() error {
	f.g.wait()
	return f.File.Sync()
}

func (f syncGateFile) Datasync() error {
	f.g.wait()
	return f.File.Datasync()
}

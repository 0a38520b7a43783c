package queue_test

import (
	"context"
	"errors"
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
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// liveBody is the payload of the message with producer id id: a reader
// that finds another payload under that id read a wrong record.
func liveBody(id string) string { return "body of " + id + strings.Repeat(".", 200) }

// TestReadOnlyBesideBusyQueue opens a queue read-only, again and again,
// while its writer enqueues, delivers, acks, nacks and dead-letters with
// small segments and compactions that copy messages forward and cut the
// log under the reader. A backlog keeps a few hundred segments, so that
// the writer's rolls can tear a listing of them. Every message a read-only
// open shows (Browse, Peek, DeadLetters, ReadLog) must carry its own
// payload and headers; an error is allowed only as a refusal to read (the
// writer removed a file under it), never ErrCorrupt of a healthy queue.
func TestReadOnlyBesideBusyQueue(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 8 << 10, SnapshotBytes: 16 << 10, MaxDeliveries: 3,
		Sync: queue.SyncNever})
	// A backlog of a few thousand messages keeps a few hundred segments
	// in the log: more names than one getdents call returns, so that a
	// listing of the directory can be torn by the writer's rolls.
	for i := 0; i < liveBacklog; i += 20 {
		items := make([]queue.Item, 20)
		for k := range items {
			id := fmt.Sprintf("b-%d", i+k)
			items[k] = queue.Item{ID: id, Payload: []byte(liveBody(id)), Headers: map[string]string{"id": id}}
		}
		_, err := q.EnqueueBatch(context.Background(), items)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() error { cancel(); wg.Wait(); return q.Close() }
	// A failed check ends the test at once: the writer must stop before
	// the directory is removed, or its errors would be the ones reported.
	t.Cleanup(func() { _ = stop() })
	// The enqueuer enqueues a message per message acked: the backlog
	// stays about as it is, and the enqueuer, which never waits for
	// anything else, does not take a core of a small machine from the
	// consumer and the read-only opens.
	credit := newCredits() // a message per message acked
	var enqueued, settled atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; credit.take(ctx); i++ {
			id := fmt.Sprintf("m-%d", i)
			_, err := q.Enqueue(ctx, []byte(liveBody(id)), queue.WithID(id), queue.WithHeaders(map[string]string{"id": id}))
			if err != nil && ctx.Err() == nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			enqueued.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			m, err := q.Dequeue(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("dequeue: %v", err)
				}
				return
			}
			switch {
			case i%7 == 3:
				err = m.Nack(0)
			case i%11 == 5:
				err = m.DeadLetter("test")
			default:
				err = m.Ack()
				credit.give(1)
			}
			if err == nil {
				settled.Add(1)
			}
			if err == nil && i%50 == 0 {
				_, err = q.RequeueAllDead()
			}
			if err == nil && i%97 == 0 {
				err = q.Compact()
			}
			if err != nil {
				t.Errorf("settle %d: %v", i, err)
				return
			}
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	var tally liveTally
	logOpens := 0
	for time.Now().Before(deadline) && !t.Failed() {
		n, err := inspectLive(dir)
		for k := 0; k < liveQuick && err == nil && time.Now().Before(deadline); k++ {
			err = readLogSample(dir, 1) // an open of the log, mostly
			logOpens++
		}
		tally.add(t, n, err)
	}
	segs, err := os.ReadDir(filepath.Join(dir, "log"))
	require.NoError(t, err)
	require.NoError(t, stop())
	t.Logf("%d read-only opens showed %d messages, %d more opens of the log; refused: %v; %d files in log/ at the end; "+
		"%d messages settled, %d enqueued", tally.opens, tally.shown, logOpens, tally.refused, len(segs), settled.Load(), enqueued.Load())
	require.Positive(t, tally.opens)
}

// credits throttle a writer beside a busy queue to what its consumer
// settles: the writer takes a credit per write, the consumer gives one per
// message settled. The consumer never blocks: credits past 1024 unspent
// are dropped (the writer has enough to do).
type credits chan struct{}

func newCredits() credits { return make(credits, 1024) }

// take waits for a credit; false once ctx is done.
func (c credits) take(ctx context.Context) bool {
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}

// give adds n credits, dropping those past the buffer.
func (c credits) give(n int) {
	for range n {
		select {
		case c <- struct{}{}:
		default:
			return
		}
	}
}

// liveTally counts the read-only opens beside a busy queue.
type liveTally struct {
	opens   int            // opens that read the queue
	shown   int            // what they showed: messages, dead values
	refused map[string]int // refusals to read (the writer removed a file under the open), by error
}

// add counts the outcome of one open that showed n: err must be nil or a
// refusal to read, never a wrong record (errWrong) nor ErrCorrupt of a
// healthy queue.
func (l *liveTally) add(t *testing.T, n int, err error) {
	t.Helper()
	if err == nil {
		l.opens++
		l.shown += n
		return
	}
	require.NotErrorIs(t, err, errWrong)
	require.NotErrorIs(t, err, queue.ErrCorrupt, "a read-only open beside a healthy queue")
	if l.refused == nil {
		l.refused = map[string]int{}
	}
	l.refused[err.Error()]++
}

// liveBacklog is how many messages wait in the queue before the test starts.
const liveBacklog = 8000

// liveSample is how many messages of each state a read-only open checks:
// a sample, so that the opens, where a writer can tear the listing of the
// segments, come often.
const liveSample = 100

// liveQuick is how many quick opens of the log follow each checked open.
const liveQuick = 20

// inspectLive opens dir read-only and checks every message it shows.
func inspectLive(dir string) (int, error) {
	r, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		infos, err := r.Browse(st, 0, liveSample)
		if err != nil {
			return n, fmt.Errorf("browse %s: %w", st, err)
		}
		for _, info := range infos {
			m, err := r.Peek(info.Seq)
			if err != nil {
				return n, fmt.Errorf("peek %d: %w", info.Seq, err)
			}
			if string(m.Payload) != liveBody(info.ID) || m.ID != info.ID || m.Headers["id"] != info.ID {
				return n, fmt.Errorf("%w: peek %d (%s, %s): id %q header %q payload %.40q", errWrong, info.Seq, info.ID, st, m.ID, m.Headers["id"], m.Payload)
			}
			n++
		}
	}
	dead, err := r.DeadLetters(0, liveSample)
	if err != nil {
		return n, fmt.Errorf("dead letters: %w", err)
	}
	for _, d := range dead {
		if string(d.Payload) != liveBody(d.ID) {
			return n, fmt.Errorf("%w: dead letter %s: payload %.40q", errWrong, d.ID, d.Payload)
		}
	}
	return n, readLogSample(dir, 10*liveSample)
}

// readLogSample reads the first n records of dir's log and checks them.
func readLogSample(dir string, n int) error {
	return sampleLog(dir, n, func(rec queue.Record) bool {
		return rec.Payload == nil || string(rec.Payload) == liveBody(rec.ID) || rec.ID == ""
	})
}

// sampleLog reads the first n records of dir's log and fails, with
// errWrong, at the first one whose payload ok refuses.
func sampleLog(dir string, n int, ok func(queue.Record) bool) error {
	read := 0
	err := queue.ReadLog(dir, 0, func(rec queue.Record) error {
		if !ok(rec) {
			return fmt.Errorf("%w: log record %d (%s of %s%s): payload %.40q", errWrong, rec.LSN, rec.Op, rec.Key, rec.ID, rec.Payload)
		}
		if read++; read == n {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

// errEnough stops ReadLog once it has checked a sample of the log.
var errEnough = errors.New("enough records read")

var errWrong = errors.New("wrong message")

// snapshotReplacingFS plays a live writer that, right after the reader
// first reads the directory, renames its new snapshot tmp into place and
// removes the old one (recovery.WriteFunc's order).
type snapshotReplacingFS struct {
	wal.OSFS
	once            *sync.Once
	tmp, final, old string
}

func (f snapshotReplacingFS) ReadDir(name string) ([]os.DirEntry, error) {
	des, err := f.OSFS.ReadDir(name)
	f.once.Do(func() {
		if err == nil {
			err = os.Rename(f.tmp, f.final)
		}
		if err == nil {
			err = os.Remove(f.old)
		}
	})
	return des, err
}

// TestSalvagePreviewBesideSnapshotReplace: a read-only salvage preview
// whose listing of the snapshots races their replacement by the writer
// loads the new snapshot, and does not report the front that a healthy
// directory's compaction cut as lost.
func TestSalvagePreviewBesideSnapshotReplace(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096})
	for range 20 {
		enqueue(t, q, strings.Repeat("x", 1000))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	enqueue(t, q, "live")
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
	snaps, err := recovery.List(dir)
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	newest := snaps[0]
	require.Greater(t, newest.LSN, uint64(1))
	// The state just before the writer's rename: its new snapshot is the
	// temporary file, an older one is still in place (never read).
	old := filepath.Join(dir, recovery.Name(1))
	require.NoError(t, os.WriteFile(old, []byte("older"), 0o600))
	require.NoError(t, os.Rename(newest.Path, newest.Path+".tmp"))

	fsys := snapshotReplacingFS{once: &sync.Once{}, tmp: newest.Path + ".tmp", final: newest.Path, old: old}
	r, err := queue.Open(dir, &queue.Options{ReadOnly: true, Salvage: true, FS: fsys})
	require.NoError(t, err)
	defer r.Close()
	rec := r.Recovery()
	require.Equal(t, newest.LSN, rec.SnapshotLSN)
	require.Zero(t, rec.LostBefore, "a healthy directory's log front reported lost")
	require.EqualValues(t, 1, r.Stats().Ready)
}

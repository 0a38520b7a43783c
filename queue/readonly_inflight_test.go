package queue_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// inFlightFS plays a running queue's write in flight for a read-only
// open: the first time the tail segment at path is opened, its reads show
// a few bytes of an entry being written at the written end, over the zeros
// the log keeps ahead of it; later opens read the file as it is.
type inFlightFS struct {
	wal.OSFS
	path   string
	end    int64         // the tail's written end
	opened *atomic.Int32 // opens of path so far
}

func (f inFlightFS) Open(name string) (wal.File, error) {
	file, err := f.OSFS.Open(name)
	if err != nil || name != f.path || f.opened.Add(1) > 1 {
		return file, err
	}
	return inFlightFile{File: file, end: f.end}, nil
}

// inFlightFile shows inFlight at end, the start of a write in flight.
type inFlightFile struct {
	wal.File
	end int64
}

var inFlight = []byte{0x2a, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07}

func (f inFlightFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	for i := range p[:n] {
		if k := off + int64(i) - f.end; k >= 0 && k < int64(len(inFlight)) {
			p[i] = inFlight[k]
		}
	}
	return n, err
}

// TestReadOnlyBesideWriteInFlight: a read-only open of a running queue
// that catches the writer's write in flight, bytes of an entry over the
// zeros ahead of the tail, does not report the queue's healthy log as
// torn: the figures are those of the records written.
func TestReadOnlyBesideWriteInFlight(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	defer q.Close()
	for range 5 {
		_, err := q.Enqueue(context.Background(), []byte("m"))
		require.NoError(t, err)
	}
	segs := q.Stats().Segments
	tail := segs[len(segs)-1]
	fs := inFlightFS{path: tail.Path, end: tail.Bytes, opened: new(atomic.Int32)}

	r, err := queue.Open(dir, &queue.Options{ReadOnly: true, FS: fs})
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.InUse())
	require.Positive(t, fs.opened.Load(), "the read-only open did not read the tail at %s", tail.Path)
	require.Nil(t, r.Recovery().Log.Torn, "a read-only open of a running queue reports its healthy log as torn")
	require.EqualValues(t, 5, r.Stats().Ready)
}

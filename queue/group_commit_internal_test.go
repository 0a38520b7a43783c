package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The README's group commit: enqueues of concurrent callers, made while
// an fsync runs, are written as one log entry under one CRC. The first
// enqueue's fsync is held while eight more are appended; the log's
// segments, parsed as the README draws them, then hold the eight in one
// entry.
func TestConcurrentEnqueuesShareOneEntry(t *testing.T) {
	const callers = 8
	ctx := context.Background()
	dir := t.TempDir()
	g := &syncGate{}
	q, err := Open(dir, &Options{FS: g, ManualRequeue: true, AppendOnly: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("before")) // the open's own writes are behind us
	require.NoError(t, err)
	g.holdWhen(func() bool { return true })

	first := make(chan error, 1)
	go func() {
		_, err := q.Enqueue(ctx, []byte("first"))
		first <- err
	}()
	<-g.held
	base := q.Stats().LastLSN // the first enqueue's record, its fsync held
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := q.Enqueue(ctx, fmt.Appendf(nil, "caller %d", i))
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return q.Stats().LastLSN == base+callers },
		10*time.Second, time.Millisecond, "the callers' records are appended while the fsync is held")
	g.release()
	require.NoError(t, <-first)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())

	var counts []int
	for _, e := range logEntries(t, filepath.Join(dir, "log")) {
		if e.first > base {
			counts = append(counts, e.count)
		}
	}
	require.NotEmpty(t, counts)
	require.Equal(t, callers, counts[0], "the entries after the held one hold %v records", counts)
}

// logEntry is one entry of a segment: its first LSN and record count.
type logEntry struct {
	first uint64
	count int
}

// logEntries parses the segments in dir as the README's on-disk format
// draws them, `uvarint(len) | entry`, an entry starting with CRC (4B),
// version (1B), first LSN (8B LE) and count (4B LE), and returns its
// entries with records, in order (witnesses, count 0, are left out).
func logEntries(t *testing.T, dir string) []logEntry {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []logEntry
	for _, de := range des { // names are zero-padded: ReadDir's order is the log's
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		require.NoError(t, err)
		for off := 0; off < len(b) && bytes.ContainsFunc(b[off:], func(r rune) bool { return r != 0 }); {
			n, k := binary.Uvarint(b[off:])
			require.True(t, k > 0 && n >= 17 && off+k+int(n) <= len(b), "bad frame in %s at %d", de.Name(), off)
			e := b[off+k : off+k+int(n)]
			if c := int(binary.LittleEndian.Uint32(e[13:])); c > 0 {
				out = append(out, logEntry{first: binary.LittleEndian.Uint64(e[5:]), count: c})
			}
			off += k + int(n)
		}
	}
	return out
}

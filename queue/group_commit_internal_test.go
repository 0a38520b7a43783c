package queue

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/seglayout"
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

	// The segments parsed as the README draws them, `uvarint(len) | entry`,
	// an entry starting with CRC (4B), version (1B), first LSN (8B LE) and
	// count (4B LE); witnesses, count 0, are left out.
	entries, err := seglayout.Dir(filepath.Join(dir, "log"))
	require.NoError(t, err)
	var counts []int
	for _, e := range entries {
		if e.First > base && e.Count > 0 {
			counts = append(counts, e.Count)
		}
	}
	require.NotEmpty(t, counts)
	require.Equal(t, callers, counts[0], "the entries after the held one hold %v records", counts)
}

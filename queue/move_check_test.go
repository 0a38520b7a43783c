package queue

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
)

// A compaction that copies a pending sorted value forward must check the
// record it copies from, as a pull does: a record that is not the value's
// (another value's publish at the value's Loc) or that fails its checksum
// is left where it is, so the pull that reaches it reports the damage. A
// copy would have given the wrong or damaged bytes a fresh record, which
// the next pull delivers as the value's payload.
func TestMoveValueChecksItsRecord(t *testing.T) {
	t.Run("another value's record", func(t *testing.T) {
		s := openMoveCheckSorted(t, t.TempDir())
		defer s.Close()
		ctx := context.Background()
		require.NoError(t, s.Publish(ctx, 1, "A", []byte("payload of A")))
		require.NoError(t, s.Publish(ctx, 2, "B", []byte("payload of B")))
		q := s.q
		q.mu.Lock()
		a := pendingValueOf(t, q.mu.st.sorted, "A")
		b := pendingValueOf(t, q.mu.st.sorted, "B")
		require.True(t, q.mu.st.sorted.MoveValue(a, b.Loc, b.Size), "A's index entry names B's record")
		q.mu.Unlock()

		_, err := q.movePinned(q.log.LastLSN()+1, false)
		require.ErrorIs(t, err, ErrCorrupt, "the compaction reports what it left behind")
		requirePullRefuses(t, s, "A")
	})
	t.Run("a damaged record", func(t *testing.T) {
		dir := t.TempDir()
		s := openMoveCheckSorted(t, dir)
		ctx := context.Background()
		require.NoError(t, s.Publish(ctx, 1, "A", []byte("DAMAGED|"+strings.Repeat("a", 900))))
		for range 6 { // seal A's segment
			require.NoError(t, s.Publish(ctx, 2, "B", []byte(strings.Repeat("b", 900))))
		}
		require.NoError(t, s.Compact()) // a snapshot: the reopen replays nothing of A's segment
		require.NoError(t, s.Close())
		segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
		require.NoError(t, err)
		require.Greater(t, len(segs), 1)
		flipMark(t, segs[0], "DAMAGED")
		s = openMoveCheckSorted(t, dir)
		defer s.Close()

		_, err = s.q.movePinned(s.q.log.LastLSN()+1, false)
		require.ErrorIs(t, err, ErrCorrupt, "the compaction reports what it left behind")
		requirePullRefuses(t, s, "A")
	})
}

func openMoveCheckSorted(t *testing.T, dir string) *Sorted[int64] {
	t.Helper()
	s, err := OpenSorted[int64](dir, &SortedOptions{CacheBytes: -1,
		Options: Options{SegmentSize: 4096, manualCompact: true}})
	require.NoError(t, err)
	return s
}

func pendingValueOf(t *testing.T, sq *index.Sorted, key string) index.SortedValue {
	t.Helper()
	var out []index.SortedValue
	sq.PendingOf(key, func(v index.SortedValue) bool { out = append(out, v); return true })
	require.Len(t, out, 1)
	return out[0]
}

// requirePullRefuses pulls every key and requires that key's batch to
// fail with a ReadError, its payload never delivered.
func requirePullRefuses(t *testing.T, s *Sorted[int64], key string) {
	t.Helper()
	bs, err := s.TryPull(10)
	for _, b := range bs {
		require.NotEqual(t, key, b.Key, "value of %s delivered: %q", key, b.Payloads())
	}
	require.ErrorIs(t, err, ErrCorrupt)
	var re *ReadError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, key, re.Key)
}

// flipMark changes one byte of the first occurrence of mark in file.
func flipMark(t *testing.T, file, mark string) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	i := strings.Index(string(b), mark)
	require.GreaterOrEqual(t, i, 0)
	b[i] ^= 0x20
	require.NoError(t, os.WriteFile(file, b, 0o600))
}

// The same for the ack queue: a message ready again whose index entry
// names another message's record is not copied forward with that
// record's payload; its delivery reports the damage.
func TestMoveEntryChecksItsRecord(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{SegmentSize: 4096, manualCompact: true})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	for _, p := range []string{"payload of A", "payload of B"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	ms := []*Message{}
	for range 2 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		ms = append(ms, m)
	}
	for _, m := range ms {
		require.NoError(t, m.Nack(0)) // ready again: an indexed entry
	}
	q.mu.Lock()
	var es []index.Entry
	q.mu.st.table.Ascend(func(e index.Entry) bool { es = append(es, e); return true })
	a := es[0]
	if len(es) == 2 {
		a.Loc = es[1].Loc // A's entry names B's record
		q.mu.st.table.Put(a)
	}
	q.mu.Unlock()
	require.Len(t, es, 2)

	_, err = q.movePinned(q.log.LastLSN()+1, false)
	require.ErrorIs(t, err, ErrCorrupt, "the compaction reports what it left behind")
	m, err := q.TryDequeue()
	require.ErrorIs(t, err, ErrCorrupt, "delivered %v", m)
	var re *ReadError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, a.ID, re.ID)
}

// A damaged record that a compaction leaves where it is still holds the
// front of the log. The compaction reports it (ErrCorrupt: a background
// failure, logged and retried with backoff; Compact returns it) and does
// not copy again what lies above it: it could not free it. Before, each
// compaction due copied every live message forward again and reported
// nothing, the log growing with the copies.
func TestCompactionReportsDamageLeftBehind(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 4096}
	q, err := Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 40 {
		mark := "delayed|"
		if i == 20 {
			mark = "DAMAGED|"
		}
		_, err := q.Enqueue(ctx, []byte(mark+strings.Repeat("d", 350)), WithDelay(time.Hour))
		require.NoError(t, err)
	}
	require.NoError(t, q.Compact()) // a snapshot: the reopen replays nothing of the delayed ones
	require.NoError(t, q.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 2)
	for _, s := range segs[:len(segs)-1] {
		if b, err := os.ReadFile(s); err == nil && strings.Contains(string(b), "DAMAGED|") {
			flipMark(t, s, "DAMAGED|")
		}
	}
	logged := &syncBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelError}))
	q, err = Open(dir, o)
	require.NoError(t, err)
	defer q.Close()

	payload := []byte(strings.Repeat("p", 400))
	for range 1500 {
		_, err := q.Enqueue(ctx, payload)
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		q.compactInBackground() // besides the housekeeper's: the count does not hang on its timing
	}
	st := q.Stats()
	require.LessOrEqual(t, st.Moved, uint64(40), "messages copied forward again and again")
	require.NotZero(t, st.BackgroundErrors, "damage left behind is not reported")
	require.ErrorIs(t, st.BackgroundErr, ErrCorrupt)
	require.Contains(t, logged.String(), "background compaction failed")
	require.ErrorIs(t, q.Compact(), ErrCorrupt)
}

// syncBuffer is a buffer that a logger writes from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package queue_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// files returns every file under dir, by relative path, with its bytes.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	}))
	return out
}

// crashedQueue returns the image of a queue killed with a message leased,
// one dead, one ready and a torn last record.
func crashedQueue(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	q := open(t, src, &queue.Options{MaxDeliveries: 1})
	for _, p := range []string{"a", "b", "c"} {
		enqueue(t, q, p)
	}
	require.NoError(t, tryDequeue(t, q).Nack(0)) // dead after one delivery
	tryDequeue(t, q)                             // leased when the process dies
	dir := crashImage(t, src)
	require.NoError(t, q.Close())
	segs := segments(t, dir)
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(last, append(b, 0x2a, 0x01, 0x02), 0o600)) // a torn entry
	return dir
}

// TestReadOnlyWritesNothing: a read-only open of a crashed queue with a torn
// tail reports its figures and changes no byte and no file name.
func TestReadOnlyWritesNothing(t *testing.T) {
	dir := crashedQueue(t)
	before := files(t, dir)
	q, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	require.NoError(t, err)
	require.False(t, q.InUse())
	require.NotNil(t, q.Recovery().Log.Torn, "the torn tail is reported, not cut")
	s := q.Stats()
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{s.Ready, s.InFlight, s.Dead})
	dead, err := q.DeadLetters(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "a", string(dead[0].Payload))
	require.Equal(t, queue.Identity{Format: queue.FormatVersion, Kind: queue.KindAck}, q.Identity())

	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrReadOnly)
	_, err = q.Enqueue(context.Background(), []byte("x"))
	require.ErrorIs(t, err, queue.ErrReadOnly)
	require.ErrorIs(t, q.RequeueDead(dead[0].ID), queue.ErrReadOnly)
	require.ErrorIs(t, q.Compact(), queue.ErrReadOnly)
	require.NoError(t, q.Close())
	require.Equal(t, before, files(t, dir))
}

// TestReadOnlyBesideRunningQueue: a queue held open by its process can be
// inspected; the figures are those of its last write.
func TestReadOnlyBesideRunningQueue(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	for range 5 {
		enqueue(t, q, "m")
	}
	tryDequeue(t, q)
	tryDequeue(t, q)
	_, err := queue.Open(dir, nil)
	require.ErrorIs(t, err, queue.ErrLocked, "a second writer is still refused")

	r, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	require.NoError(t, err)
	require.True(t, r.InUse())
	s := r.Stats()
	require.Equal(t, int64(3), s.Ready)
	require.Equal(t, int64(2), s.InFlight)
	require.NoError(t, r.Close())
	enqueue(t, q, "after")
	require.NoError(t, q.Close())
}

// TestReadOnlyNotAQueue: a read-only open creates nothing where there is
// no queue.
func TestReadOnlyNotAQueue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	_, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	require.Error(t, err)
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestDeadLettersMax: max <= 0 lists every dead letter (it used to list
// one), a positive max at most max.
func TestDeadLettersMax(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{MaxDeliveries: 1})
	defer q.Close()
	for range 3 {
		enqueue(t, q, "p")
		require.NoError(t, tryDequeue(t, q).Nack(0))
	}
	for _, c := range []struct{ max, want int }{{-1, 3}, {0, 3}, {1, 1}, {2, 2}, {5, 3}} {
		t.Run(fmt.Sprint("max ", c.max), func(t *testing.T) {
			ds, err := q.DeadLetters(0, c.max)
			require.NoError(t, err)
			require.Len(t, ds, c.want)
		})
	}
}

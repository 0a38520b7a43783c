package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// opener opens a directory as one kind of queue and closes it again.
type opener struct {
	name string
	open func(dir string) (func() error, error)
}

func sortedOpener[K queue.SortKey](name string) opener {
	return opener{name, func(dir string) (func() error, error) {
		s, err := queue.OpenSorted[K](dir, nil)
		if err != nil {
			return nil, err
		}
		return s.Close, nil
	}}
}

var (
	ackOpener = opener{"ack", func(dir string) (func() error, error) {
		q, err := queue.Open(dir, nil)
		if err != nil {
			return nil, err
		}
		return q.Close, nil
	}}
	windowedOpener = opener{"windowed", func(dir string) (func() error, error) {
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Second})
		if err != nil {
			return nil, err
		}
		return w.Close, nil
	}}
	int64Opener   = sortedOpener[int64]("sorted int64")
	float64Opener = sortedOpener[float64]("sorted float64")
	stringOpener  = sortedOpener[string]("sorted string")
	timeOpener    = sortedOpener[time.Time]("sorted time")
)

// TestWrongKind: a directory opened as another kind of queue, or with
// another sort key type, is refused with ErrWrongKind naming what it holds.
func TestWrongKind(t *testing.T) {
	cases := []struct {
		created, opened opener
		holds           string // what the error must say the directory holds
	}{
		{int64Opener, float64Opener, "a sorted queue of int64 sort keys"},
		{int64Opener, stringOpener, "a sorted queue of int64 sort keys"},
		{int64Opener, ackOpener, "a sorted queue of int64 sort keys"},
		{int64Opener, windowedOpener, "a sorted queue of int64 sort keys"},
		{ackOpener, int64Opener, "an ack queue"},
		{ackOpener, windowedOpener, "an ack queue"},
		{windowedOpener, timeOpener, "a windowed queue of time sort keys"},
		{timeOpener, windowedOpener, "a sorted queue of time sort keys"},
	}
	for _, c := range cases {
		t.Run(c.created.name+" as "+c.opened.name, func(t *testing.T) {
			dir := t.TempDir()
			closeFn, err := c.created.open(dir)
			require.NoError(t, err)
			require.NoError(t, closeFn())
			_, err = c.opened.open(dir)
			require.ErrorIs(t, err, queue.ErrWrongKind)
			require.ErrorContains(t, err, "holds "+c.holds)
			closeFn, err = c.created.open(dir)
			require.NoError(t, err, "the refused open must leave the directory as it was")
			require.NoError(t, closeFn())
		})
	}
}

// TestSortKeyNotReinterpreted is the case from the field: sort key 42 of a
// Sorted[int64] came back as 2.08e-322 through Sorted[float64].
func TestSortKeyNotReinterpreted(t *testing.T) {
	dir := t.TempDir()
	s, err := queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Publish(context.Background(), 42, "k", []byte("v")))
	require.NoError(t, s.Close())
	f, err := queue.OpenSorted[float64](dir, nil)
	if err == nil {
		bs, perr := f.TryPull(10)
		require.NoError(t, perr)
		t.Fatalf("opened as float64; sort key came back as %v", bs[0].Values[0].Sort)
	}
	require.ErrorIs(t, err, queue.ErrWrongKind)
}

func TestIdentityRecorded(t *testing.T) {
	dir := t.TempDir()
	s, err := queue.OpenSorted[uint32](dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	id, err := queue.ReadIdentity(dir)
	require.NoError(t, err)
	require.Equal(t, queue.Identity{Format: queue.FormatVersion, Kind: queue.KindSorted, SortKey: "uint32"}, id)
	_, err = os.Stat(filepath.Join(dir, "IDENTITY.tmp"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestIdentityCorrupt(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	require.NoError(t, q.Close())
	path := filepath.Join(dir, "IDENTITY")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-5] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err = queue.Open(dir, nil)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "IDENTITY")
}

// TestAdoptLegacy: a directory written before identity files is adopted:
// the kind its log shows is kept, the other refused, and a sorted one takes
// the kind and key type it is opened as.
func TestAdoptLegacy(t *testing.T) {
	ctx := context.Background()
	ackDir := func(t *testing.T) string {
		dir := t.TempDir()
		q := open(t, dir, nil)
		enqueue(t, q, "x")
		require.NoError(t, q.Close())
		return dir
	}
	sortedDir := func(t *testing.T) string {
		dir := t.TempDir()
		s, err := queue.OpenSorted[int64](dir, nil)
		require.NoError(t, err)
		require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
		require.NoError(t, s.Close())
		return dir
	}
	emptyDir := func(t *testing.T) string {
		dir := t.TempDir()
		q := open(t, dir, nil)
		require.NoError(t, q.Close())
		return dir
	}
	cases := []struct {
		name   string
		make   func(t *testing.T) string
		opened opener
		adopt  *queue.Identity // nil: refused
	}{
		{"ack as ack", ackDir, ackOpener, &queue.Identity{Kind: queue.KindAck}},
		{"ack as sorted", ackDir, int64Opener, nil},
		{"sorted as ack", sortedDir, ackOpener, nil},
		{"sorted as sorted", sortedDir, int64Opener, &queue.Identity{Kind: queue.KindSorted, SortKey: "int64"}},
		{"sorted as windowed", sortedDir, windowedOpener, &queue.Identity{Kind: queue.KindWindowed, SortKey: "time"}},
		{"empty as sorted", emptyDir, stringOpener, &queue.Identity{Kind: queue.KindSorted, SortKey: "string"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.make(t)
			require.NoError(t, os.Remove(filepath.Join(dir, "IDENTITY")))
			closeFn, err := c.opened.open(dir)
			if c.adopt == nil {
				require.ErrorIs(t, err, queue.ErrWrongKind)
				require.ErrorContains(t, err, "inferred from its log")
				_, err = queue.ReadIdentity(dir)
				require.ErrorIs(t, err, os.ErrNotExist, "a refused open writes no identity")
				return
			}
			require.NoError(t, err)
			require.NoError(t, closeFn())
			id, err := queue.ReadIdentity(dir)
			require.NoError(t, err)
			want := *c.adopt
			want.Format = queue.FormatVersion
			require.Equal(t, want, id)
		})
	}
}

package queue_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// format1Dir copies testdata/format1-ack, a directory an older release
// wrote (directory format 1, log entries of version 1: "one", "two" and
// "three" enqueued, "one" acked, no snapshot), into a fresh directory.
func format1Dir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	src := filepath.Join("testdata", "format1-ack")
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	}))
	return dir
}

// readyPayloads returns the payloads of the ready messages, in order.
func readyPayloads(t *testing.T, q *queue.Queue) []string {
	t.Helper()
	infos, err := q.Browse(queue.StateReady, 0, 100)
	require.NoError(t, err)
	var out []string
	for _, m := range infos {
		p, err := q.Peek(m.Seq)
		require.NoError(t, err)
		out = append(out, string(p.Payload))
	}
	return out
}

// TestFormat1ReadOnly: a read-only open of a format-1 directory reads its
// version-1 log and leaves the directory as it was, format 1.
func TestFormat1ReadOnly(t *testing.T) {
	dir := format1Dir(t)
	before := files(t, dir)
	q, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	require.NoError(t, err)
	require.Equal(t, queue.Identity{Format: 1, Kind: queue.KindAck}, q.Identity())
	require.Equal(t, []string{"two", "three"}, readyPayloads(t, q))
	require.NoError(t, q.Close())
	require.Equal(t, before, files(t, dir), "a read-only open changed the directory")
	id, err := queue.ReadIdentity(dir)
	require.NoError(t, err)
	require.Equal(t, 1, id.Format)
}

// TestFormat1Upgrade: a writable open of a format-1 directory reads the
// records an older release wrote, and raises the directory to format 2
// before it writes: after it, the identity file says 2, and the log,
// version-1 entries then version-2 ones, reads back whole.
func TestFormat1Upgrade(t *testing.T) {
	dir := format1Dir(t)
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, queue.Identity{Format: queue.FormatVersion, Kind: queue.KindAck}, q.Identity())
	require.Equal(t, 2, queue.FormatVersion)
	id, err := queue.ReadIdentity(dir)
	require.NoError(t, err)
	require.Equal(t, 2, id.Format, "the identity file is rewritten before the first write")
	require.Equal(t, []string{"two", "three"}, readyPayloads(t, q))
	_, err = q.Enqueue(context.Background(), []byte("four"))
	require.NoError(t, err)
	require.NoError(t, q.Close())

	q, err = queue.Open(dir, &queue.Options{ReadOnly: true})
	require.NoError(t, err)
	require.Equal(t, []string{"two", "three", "four"}, readyPayloads(t, q))
	require.Equal(t, 2, q.Identity().Format)
	require.NoError(t, q.Close())
	_, err = queue.Verify(dir, nil)
	require.NoError(t, err)
}

// failFirstOpen is the real file system, except that the first open of a
// snapshot fails: the read-only replay that decides whether a directory
// without an identity file may be adopted fails, and the writable open
// after it does not.
type failFirstOpen struct {
	wal.OSFS
	failed atomic.Bool
}

func (f *failFirstOpen) Open(name string) (wal.File, error) {
	if strings.HasPrefix(filepath.Base(name), "snap") && f.failed.CompareAndSwap(false, true) {
		return nil, errors.New("injected read failure")
	}
	return f.OSFS.Open(name)
}

// TestUnadoptedDirectoryGetsFormat2: a directory without an identity file
// whose read-only replay fails is opened without adopting it, and the open
// then writes entries of version 2; an older release, finding no identity
// file, would adopt it and cut those entries as a torn tail. So the open
// writes an identity file of format 2 before its log is opened.
func TestUnadoptedDirectoryGetsFormat2(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	enqueue(t, q, "one")
	require.NoError(t, q.Compact()) // a snapshot, which the adoption reads first
	require.NoError(t, q.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "IDENTITY")))

	fsys := &failFirstOpen{}
	q, err := queue.Open(dir, &queue.Options{FS: fsys})
	require.NoError(t, err)
	require.True(t, fsys.failed.Load(), "the adoption's read-only replay did not fail")
	enqueue(t, q, "two")
	id, err := queue.ReadIdentity(dir)
	require.NoError(t, err, "entries of version 2 written with no identity file")
	require.Equal(t, queue.Identity{Format: queue.FormatVersion, Kind: queue.KindAck}, id)
	require.Equal(t, []string{"one", "two"}, readyPayloads(t, q))
	require.NoError(t, q.Close())
}

// TestFormat1RepairRaisesFormat: a repair of a damaged format-1 directory
// writes entries of version 2 (its salvage and compaction), so it raises
// the identity file to format 2 first, as a writable open does: left at
// format 1, the older release would open the repaired directory as its
// own and cut those entries as a torn tail. The old release wrote the
// directory, a bit of its first segment rotted.
func TestFormat1RepairRaisesFormat(t *testing.T) {
	for _, c := range upgradeCases() {
		t.Run(c.fixture, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			copyTree(t, filepath.Join("testdata", c.fixture), dir)
			seg := filepath.Join(dir, "log", "00000000000000000001")
			b, err := os.ReadFile(seg)
			require.NoError(t, err)
			b[len(b)/2] ^= 0x10
			require.NoError(t, os.WriteFile(seg, b, 0o600))

			rep, err := queue.Repair(dir, &queue.RepairOptions{Options: &queue.Options{SegmentSize: 4096}})
			require.NoError(t, err)
			require.True(t, rep.Repaired, "nothing to repair: the damage did not take")
			id, err := queue.ReadIdentity(dir)
			require.NoError(t, err)
			require.Equal(t, queue.FormatVersion, id.Format, "a repair wrote entries of version 2 under format %d", id.Format)
			q, err := c.open(dir, nil)
			require.NoError(t, err)
			require.NoError(t, q.Close())
		})
	}
}

package recovery_test

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

var update = flag.Bool("update", false, "rewrite testdata/snapshot.golden")

func TestSnapshotGolden(t *testing.T) {
	got := recovery.Encode(42, []byte("body"))
	path := filepath.Join("testdata", "snapshot.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got, "the snapshot file format changed")
	lsn, body, err := recovery.Decode(want)
	require.NoError(t, err)
	require.EqualValues(t, 42, lsn)
	require.Equal(t, "body", string(body))
}

func TestDecodeRejectsDamage(t *testing.T) {
	good := recovery.Encode(7, []byte("some state"))
	for name, damage := range map[string]func([]byte) []byte{
		"empty":        func(b []byte) []byte { return nil },
		"short header": func(b []byte) []byte { return b[:20] },
		"bad magic":    func(b []byte) []byte { b[0] = 'X'; return b },
		"bad version":  func(b []byte) []byte { b[8] = 9; return b },
		"truncated":    func(b []byte) []byte { return b[:len(b)-1] },
		"appended":     func(b []byte) []byte { return append(b, 0) },
		"bit flip":     func(b []byte) []byte { b[len(b)-2] ^= 1; return b },
		"lsn flip":     func(b []byte) []byte { b[13] ^= 1; return b },
	} {
		t.Run(name, func(t *testing.T) {
			b := damage(append([]byte(nil), good...))
			_, _, err := recovery.Decode(b)
			require.ErrorIs(t, err, recovery.ErrCorrupt)
		})
	}
}

func TestWriteLatestAndRemoveOlder(t *testing.T) {
	dir := t.TempDir()
	_, _, err := recovery.Latest(dir)
	require.ErrorIs(t, err, recovery.ErrNoSnapshot)

	var steps []string
	_, err = recovery.Write(dir, 10, []byte("ten"), &recovery.WriteOptions{Step: func(s string) { steps = append(steps, s) }})
	require.NoError(t, err)
	require.Equal(t, []string{"written", "synced", "renamed", "dir-synced", "removed"}, steps)
	info, err := recovery.Write(dir, 20, []byte("twenty"), nil)
	require.NoError(t, err)
	fi, err := os.Stat(info.Path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	infos, err := recovery.List(dir)
	require.NoError(t, err)
	require.Len(t, infos, 1, "older snapshots are removed")
	got, body, err := recovery.Latest(dir)
	require.NoError(t, err)
	require.EqualValues(t, 20, got.LSN)
	require.Equal(t, "twenty", string(body))
}

func TestLatestCorruptIsAnError(t *testing.T) {
	dir := t.TempDir()
	info, err := recovery.Write(dir, 5, []byte("five"), nil)
	require.NoError(t, err)
	b, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	b[len(b)-1] ^= 0xff
	require.NoError(t, os.WriteFile(info.Path, b, 0o600))
	_, _, err = recovery.Latest(dir)
	require.ErrorIs(t, err, recovery.ErrCorrupt)
	require.Contains(t, err.Error(), info.Path, "the error names the file")
}

func TestLeftoverTempIsIgnoredAndRemoved(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, recovery.Name(9)+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte("half written"), 0o600))
	_, _, err := recovery.Latest(dir)
	require.ErrorIs(t, err, recovery.ErrNoSnapshot, "a temp file is never loaded")
	_, err = recovery.Write(dir, 10, nil, nil)
	require.NoError(t, err)
	_, err = os.Stat(tmp)
	require.True(t, os.IsNotExist(err))
}

// TestWriteFuncStreams checks that a streamed body makes the same file as
// Encode, whatever the sizes of the writes, and that a failed encode
// leaves no file behind.
func TestWriteFuncStreams(t *testing.T) {
	dir := t.TempDir()
	body := make([]byte, 1<<20+37)
	for i := range body {
		body[i] = byte(i * 7)
	}
	info, err := recovery.WriteFunc(dir, 42, func(w io.Writer) error {
		for rest, n := body, 1; len(rest) > 0; n = n*3 + 1 {
			n = min(n, len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	}, nil)
	require.NoError(t, err)
	got, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, recovery.Encode(42, body), got)
	require.Equal(t, int64(len(got)), info.Bytes)

	boom := errors.New("boom")
	_, err = recovery.WriteFunc(dir, 43, func(w io.Writer) error {
		_, _ = w.Write([]byte("partial"))
		return boom
	}, nil)
	require.ErrorIs(t, err, boom)
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Equal(t, []string{info.Path}, names, "only the good snapshot is left")
}

// removingFS removes the oldest snapshot right after the directory is
// first read, as a live writer does when it replaces a snapshot beside a
// reader.
type removingFS struct {
	wal.OSFS
	once   *sync.Once
	victim string
}

func (f removingFS) ReadDir(name string) ([]os.DirEntry, error) {
	des, err := f.OSFS.ReadDir(name)
	f.once.Do(func() {
		if err == nil {
			err = os.Remove(f.victim)
		}
	})
	return des, err
}

func TestListSkipsSnapshotRemovedWhileListing(t *testing.T) {
	dir := t.TempDir()
	_, err := recovery.Write(dir, 20, []byte("twenty"), nil)
	require.NoError(t, err)
	old := filepath.Join(dir, recovery.Name(10))
	require.NoError(t, os.WriteFile(old, []byte("ten"), 0o600))

	infos, err := recovery.ListFS(removingFS{once: &sync.Once{}, victim: old}, dir)
	require.NoError(t, err, "a snapshot removed by its writer after the directory was read is not an error")
	require.Len(t, infos, 1)
	require.EqualValues(t, 20, infos[0].LSN)
}

// replacingFS plays a writer that replaces the snapshot old by final right
// after the reader first reads the directory (or, with onOpen, right
// before the reader first opens old): it renames its temporary file tmp
// into place, then removes old, as WriteFunc does.
type replacingFS struct {
	wal.OSFS
	once            *sync.Once
	onOpen          bool
	tmp, final, old string
}

func (f replacingFS) replace() {
	f.once.Do(func() {
		if err := os.Rename(f.tmp, f.final); err != nil {
			panic(err)
		}
		if err := os.Remove(f.old); err != nil {
			panic(err)
		}
	})
}

func (f replacingFS) ReadDir(name string) ([]os.DirEntry, error) {
	des, err := f.OSFS.ReadDir(name)
	if !f.onOpen {
		f.replace()
	}
	return des, err
}

func (f replacingFS) Open(name string) (wal.File, error) {
	if f.onOpen && name == f.old {
		f.replace()
	}
	return f.OSFS.Open(name)
}

// TestLatestBesideReplacingWriter: at every instant the directory holds a
// snapshot (the old one until the new one is renamed in), so Latest must
// load one, whenever the writer's rename and remove fall in its read.
func TestLatestBesideReplacingWriter(t *testing.T) {
	for _, onOpen := range []bool{false, true} {
		t.Run(map[bool]string{false: "after the listing", true: "before the read"}[onOpen], func(t *testing.T) {
			dir := t.TempDir()
			_, err := recovery.Write(dir, 10, []byte("ten"), nil)
			require.NoError(t, err)
			final := filepath.Join(dir, recovery.Name(20))
			require.NoError(t, os.WriteFile(final+".tmp", recovery.Encode(20, []byte("twenty")), 0o600))
			fsys := replacingFS{once: &sync.Once{}, onOpen: onOpen, tmp: final + ".tmp", final: final,
				old: filepath.Join(dir, recovery.Name(10))}

			info, body, err := recovery.LatestFS(fsys, dir)
			require.NoError(t, err)
			require.EqualValues(t, 20, info.LSN)
			require.Equal(t, "twenty", string(body))
		})
	}
}

// phantomFS lists a snapshot that no stat finds, at every read of the
// directory.
type phantomFS struct{ wal.OSFS }

func (f phantomFS) ReadDir(name string) ([]os.DirEntry, error) {
	des, err := f.OSFS.ReadDir(name)
	return append(des, phantomEntry{}), err
}

type phantomEntry struct{}

func (phantomEntry) Name() string               { return recovery.Name(30) }
func (phantomEntry) IsDir() bool                { return false }
func (phantomEntry) Type() fs.FileMode          { return 0 }
func (phantomEntry) Info() (fs.FileInfo, error) { return nil, fs.ErrNotExist }

// TestListEndsWhenNothingChanges: List reads the directory again after a
// snapshot vanished only while the reads find other snapshots; a listing
// that keeps naming a file no stat finds ends with the others.
func TestListEndsWhenNothingChanges(t *testing.T) {
	dir := t.TempDir()
	_, err := recovery.Write(dir, 20, []byte("twenty"), nil)
	require.NoError(t, err)
	infos, err := recovery.ListFS(phantomFS{}, dir)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.EqualValues(t, 20, infos[0].LSN)
}

package recovery

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/walq/walq/wal"
)

// WriteOptions tunes Write. A nil *WriteOptions means the defaults.
type WriteOptions struct {
	FileMode os.FileMode // default 0600
	FS       wal.FS      // the file system written through; default the real one (wal.OSFS)
	// Step, when set, is called after each step of Write with its name
	// ("written", "synced", "renamed", "dir-synced", "removed"); crash tests
	// use it to stop the process at that point.
	Step func(name string)
}

// Write stores a snapshot of the state as of lsn in dir: temporary file,
// fsync, rename, directory fsync, then removal of older snapshots and a
// second directory fsync. It returns the new snapshot's Info.
func Write(dir string, lsn uint64, body []byte, opts *WriteOptions) (Info, error) {
	return WriteFunc(dir, lsn, func(w io.Writer) error {
		_, err := w.Write(body)
		return err
	}, opts)
}

// WriteFunc is Write with the body written to w by encode, which streams
// it to the temporary file: a large body is never held in memory whole.
// An error from encode is returned wrapped (errors.Is finds it), after
// the temporary file is removed. w also implements io.ByteWriter.
func WriteFunc(dir string, lsn uint64, encode func(w io.Writer) error, opts *WriteOptions) (Info, error) {
	o := WriteOptions{FileMode: 0o600}
	if opts != nil {
		o = *opts
		if o.FileMode == 0 {
			o.FileMode = 0o600
		}
	}
	if o.FS == nil {
		o.FS = wal.OSFS{}
	}
	step := func(name string) {
		if o.Step != nil {
			o.Step(name)
		}
	}
	final := filepath.Join(dir, Name(lsn))
	tmp := final + ".tmp"
	size, err := writeSynced(o.FS, tmp, lsn, encode, o.FileMode, step)
	if err != nil {
		// A temporary file is never loaded; removing it keeps a full disk
		// from filling with one more at each retry.
		if rerr := o.FS.Remove(tmp); rerr != nil && !os.IsNotExist(rerr) {
			err = fmt.Errorf("%w (and removing %s: %v)", err, tmp, rerr)
		}
		return Info{}, err
	}
	if err := o.FS.Rename(tmp, final); err != nil {
		return Info{}, fmt.Errorf("recovery: rename %s: %w", tmp, err)
	}
	step("renamed")
	if err := wal.SyncDirFS(o.FS, dir); err != nil {
		return Info{}, err
	}
	step("dir-synced")
	if err := removeOlder(o.FS, dir, lsn); err != nil {
		return Info{}, err
	}
	step("removed")
	return Info{Path: final, LSN: lsn, Bytes: size}, nil
}

// writeSynced writes the snapshot file at path and fsyncs it; it returns
// the file's size.
func writeSynced(fsys wal.FS, path string, lsn uint64, encode func(io.Writer) error, mode os.FileMode, step func(string)) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, mode)
	if err != nil {
		return 0, fmt.Errorf("recovery: create %s: %w", path, err)
	}
	size, err := writeFile(f, lsn, encode)
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("recovery: write %s: %w", path, err)
	}
	step("written")
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("recovery: fsync %s: %w", path, err)
	}
	step("synced")
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("recovery: close %s: %w", path, err)
	}
	return size, nil
}

// writeFile streams the body after room for the header, then writes the
// header, whose checksum covers the body: it is computed by reading the
// body back, which the page cache still holds.
func writeFile(f wal.File, lsn uint64, encode func(io.Writer) error) (int64, error) {
	if _, err := f.Seek(headerSize, io.SeekStart); err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	cw := &countingWriter{w: bw}
	if err := encode(cw); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	h := make([]byte, headerSize)
	putHeader(h, lsn, int(cw.n))
	sum := crc32.New(castagnoli)
	sum.Write(h[13:])
	if _, err := io.Copy(sum, io.NewSectionReader(f, headerSize, cw.n)); err != nil {
		return 0, err
	}
	setChecksum(h, sum.Sum32())
	if _, err := f.WriteAt(h, 0); err != nil {
		return 0, err
	}
	return headerSize + cw.n, nil
}

// countingWriter counts the bytes written through it. It is an
// io.ByteWriter too, so that encoders writing a byte at a time (msgpack
// type codes) do not allocate for each.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) WriteByte(b byte) error {
	if err := c.w.WriteByte(b); err != nil {
		return err
	}
	c.n++
	return nil
}

// removeOlder removes snapshots older than lsn and leftover temporary files.
func removeOlder(fsys wal.FS, dir string, lsn uint64) error {
	infos, err := ListFS(fsys, dir)
	if err != nil {
		return err
	}
	removed := false
	for _, in := range infos {
		if in.LSN < lsn {
			if err := fsys.Remove(in.Path); err != nil {
				return fmt.Errorf("recovery: remove %s: %w", in.Path, err)
			}
			removed = true
		}
	}
	tmps, err := tempFiles(fsys, dir)
	if err != nil {
		return err
	}
	for _, t := range tmps {
		if err := fsys.Remove(t); err != nil {
			return fmt.Errorf("recovery: remove %s: %w", t, err)
		}
		removed = true
	}
	if !removed {
		return nil
	}
	return wal.SyncDirFS(fsys, dir)
}

// tempFiles lists the temporary snapshot files in dir.
func tempFiles(fsys wal.FS, dir string) ([]string, error) {
	des, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("recovery: list %s: %w", dir, err)
	}
	var out []string
	for _, de := range des {
		if ok, _ := filepath.Match(prefix+"*"+suffix+".tmp", de.Name()); ok {
			out = append(out, filepath.Join(dir, de.Name()))
		}
	}
	return out, nil
}

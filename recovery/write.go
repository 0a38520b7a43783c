package recovery

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteOptions tunes Write. A nil *WriteOptions means the defaults.
type WriteOptions struct {
	FileMode os.FileMode // default 0600
	// Step, when set, is called after each step of Write with its name
	// ("written", "synced", "renamed", "dir-synced", "removed"); crash tests
	// use it to stop the process at that point.
	Step func(name string)
}

// Write stores a snapshot of the state as of lsn in dir: temporary file,
// fsync, rename, directory fsync, then removal of older snapshots and a
// second directory fsync. It returns the new snapshot's Info.
func Write(dir string, lsn uint64, body []byte, opts *WriteOptions) (Info, error) {
	o := WriteOptions{FileMode: 0o600}
	if opts != nil {
		o = *opts
		if o.FileMode == 0 {
			o.FileMode = 0o600
		}
	}
	step := func(name string) {
		if o.Step != nil {
			o.Step(name)
		}
	}
	final := filepath.Join(dir, Name(lsn))
	tmp := final + ".tmp"
	data := Encode(lsn, body)
	if err := writeSynced(tmp, data, o.FileMode, step); err != nil {
		// A temporary file is never loaded; removing it keeps a full disk
		// from filling with one more at each retry.
		if rerr := os.Remove(tmp); rerr != nil && !os.IsNotExist(rerr) {
			err = fmt.Errorf("%w (and removing %s: %v)", err, tmp, rerr)
		}
		return Info{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return Info{}, fmt.Errorf("recovery: rename %s: %w", tmp, err)
	}
	step("renamed")
	if err := SyncDir(dir); err != nil {
		return Info{}, err
	}
	step("dir-synced")
	if err := removeOlder(dir, lsn); err != nil {
		return Info{}, err
	}
	step("removed")
	return Info{Path: final, LSN: lsn, Bytes: int64(len(data))}, nil
}

func writeSynced(path string, data []byte, mode os.FileMode, step func(string)) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("recovery: create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("recovery: write %s: %w", path, err)
	}
	step("written")
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("recovery: fsync %s: %w", path, err)
	}
	step("synced")
	if err := f.Close(); err != nil {
		return fmt.Errorf("recovery: close %s: %w", path, err)
	}
	return nil
}

// removeOlder removes snapshots older than lsn and leftover temporary files.
func removeOlder(dir string, lsn uint64) error {
	infos, err := List(dir)
	if err != nil {
		return err
	}
	removed := false
	for _, in := range infos {
		if in.LSN < lsn {
			if err := os.Remove(in.Path); err != nil {
				return fmt.Errorf("recovery: remove %s: %w", in.Path, err)
			}
			removed = true
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, prefix+"*"+suffix+".tmp"))
	for _, t := range tmps {
		if err := os.Remove(t); err != nil {
			return fmt.Errorf("recovery: remove %s: %w", t, err)
		}
		removed = true
	}
	if !removed {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so that the creation, renaming and removal
// of the files in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("recovery: open dir %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("recovery: fsync dir %s: %w", dir, err)
	}
	return d.Close()
}

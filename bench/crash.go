package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The crash workload measures the time a store takes to open after its
// process was killed (kill -9) with a log that no snapshot or clean close
// has summed up: what a restart after a crash costs, not a restart after a
// clean shutdown (the recovery workload).
//
//  1. build: a child process (`bench child grow -kill`) enqueues Size bytes
//     of messages with recoveryProducers goroutines, reports what each
//     producer was told was stored, and kills itself with SIGKILL without
//     closing the store. walq's Size is chosen below its default
//     SnapshotBytes (64 MiB of log), so no snapshot was taken: the open
//     replays the whole log, the most it ever replays with the default
//     options;
//  2. rounds: each round copies the crashed store (untimed: the page cache
//     is warm) and times the open of the copy up to the first delivery;
//  3. verify: the crashed store itself is opened and drained, and every
//     message a producer was told was stored must come out.

// replayReporter is implemented by systems that say what their open
// replayed (walq: queue.Recovery).
type replayReporter interface {
	// replayed returns a note on what the last open replayed, and whether
	// it found the store closed cleanly.
	replayed() (note string, clean bool)
}

// buildCrashed returns the builder of the crash workload; exe is this
// program, growCap bounds the child's growth.
func (m *matrix) buildCrashed(exe string, growCap time.Duration) storeBuilder {
	return func(ctx context.Context, s System, c cell) (*recoveryStore, error) {
		st, err := m.newStore(s, c)
		if err != nil {
			return st, err
		}
		st.crashed = true
		rep, err := runChild(ctx, exe, []string{"grow", "-kill", "-time", growCap.String(), "-system", s.Name,
			"-dir", st.dir, "-payload", strconv.Itoa(c.Payload), "-size", strconv.FormatInt(c.Size, 10)})
		if err != nil {
			return st, err
		}
		st.chk.expect(rep.Counts)
		for _, n := range rep.Counts {
			st.left += n
		}
		m.logf("%-28s build  %-17s %d messages, %s on disk, killed", c, s.Name, st.left, sizeString(diskUsage(st.dir)))
		return st, nil
	}
}

// crashNote returns what q's open replayed, and an error when it found a
// clean close: then the round measured no recovery after a crash.
func crashNote(q Queue) (string, []string) {
	r, ok := q.(replayReporter)
	if !ok {
		return "", nil
	}
	note, clean := r.replayed()
	if clean {
		return note, []string{"the open after the kill found a clean close"}
	}
	return note, nil
}

// copyStore copies the directory tree dir to a fresh sibling directory and
// returns its path.
func copyStore(dir string) (string, error) {
	dst, err := os.MkdirTemp(filepath.Dir(dir), "copy-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil // lock files and sockets are not the store
		}
		return copyFile(path, to)
	})
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", dir, err)
	}
	return dst, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

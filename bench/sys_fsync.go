package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// errShortRecord is returned by the fsync loop's Scan for a torn record.
var errShortRecord = errors.New("fsync: short record")

func fsyncSystems() []System {
	return []System{{
		Name: "fsync/loop", Family: "fsync", Mode: "loop", Kind: KindLog,
		Durable: true, FIFO: true,
		Config: func(Hint) string {
			return "lower bound: one file, O_APPEND write of uint32 len + payload, then fdatasync, " +
				"one op at a time under a mutex (no grouping)"
		},
		Open: func(dir string, _ Hint) (Queue, error) { return openFsyncLoop(dir, true) },
	}, {
		Name: "append/loop", Family: "append", Mode: "loop", Kind: KindLog, FIFO: true,
		Config: func(Hint) string {
			return "lower bound without fsync: one file, O_APPEND write of uint32 len + payload, " +
				"one write call per op under a mutex; drain.enqueue only"
		},
		Open: func(dir string, _ Hint) (Queue, error) { return openFsyncLoop(dir, false) },
	}}
}

// fsyncLoop appends each record and, when sync, fdatasyncs before
// returning: the cost of one durable write on this disk (or of one write
// call), with no batching.
type fsyncLoop struct {
	mu   sync.Mutex // serialises write+fdatasync and guards buf
	f    *os.File
	sync bool   // fdatasync after every write
	buf  []byte // record being written; guarded by mu
}

func openFsyncLoop(dir string, sync bool) (*fsyncLoop, error) {
	path := filepath.Join(dir, "log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fsync: open: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &fsyncLoop{f: f, sync: sync}, nil
}

// syncDir fsyncs a directory so that a file created in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func (l *fsyncLoop) Enqueue(_ context.Context, payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = binary.LittleEndian.AppendUint32(l.buf[:0], uint32(len(payload)))
	l.buf = append(l.buf, payload...)
	if _, err := l.f.Write(l.buf); err != nil {
		return fmt.Errorf("fsync: write: %w", err)
	}
	if !l.sync {
		return nil
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("fsync: fdatasync: %w", err)
	}
	return nil
}

func (l *fsyncLoop) NewConsumer() (Consumer, error) { return nil, errNoConsumer }

// Scan reads the records back in order.
func (l *fsyncLoop) Scan(fn func([]byte) error) error {
	f, err := os.Open(l.f.Name())
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [4]byte
	var rec []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%w: %v", errShortRecord, err)
		}
		n := int(binary.LittleEndian.Uint32(hdr[:]))
		if cap(rec) < n {
			rec = make([]byte, n)
		}
		rec = rec[:n]
		if _, err := io.ReadFull(r, rec); err != nil {
			return fmt.Errorf("%w: %v", errShortRecord, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

func (l *fsyncLoop) Close() error { return l.f.Close() }

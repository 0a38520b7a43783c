package wal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// unlinkGateFS is a crash file system that holds the first removal of a
// segment file, once armed, until the test lets it go.
type unlinkGateFS struct {
	*crashfs.FS
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	let     sync.Once
	release chan struct{}
}

func (g *unlinkGateFS) Remove(name string) error {
	g.mu.Lock()
	held := g.armed && !strings.Contains(filepath.Base(name), ".")
	if held {
		g.armed = false
	}
	g.mu.Unlock()
	if held {
		close(g.reached)
		<-g.release
	}
	return g.FS.Remove(name)
}

func (g *unlinkGateFS) goOn() { g.let.Do(func() { close(g.release) }) }

// overlapRun is what the overlapped truncation's workload saw before the
// crash.
type overlapRun struct {
	acked     map[int]wal.LSN // records reported durable: id -> LSN
	cut       wal.LSN         // TruncateFront's argument; 0 when not called
	truncated bool            // TruncateFront returned nil
}

// powerRecord is record id of the overlap workload, 500 bytes.
func powerRecord(id int) []byte {
	s := fmt.Sprintf("rec-%05d-", id)
	return []byte(s + strings.Repeat("x", 500-len(s)))
}

// overlapWorkload fills four 4 KiB segments (acknowledged by a Flush),
// then truncates below the last sealed one with its first unlink held
// while 20 more records are appended and waited for one by one (two rolls
// or more), then lets the truncation go on, appends 5 more once it has
// returned and closes the log.
func overlapWorkload(dir string, opts *wal.Options, g *unlinkGateFS) overlapRun {
	defer g.goOn()
	run := overlapRun{acked: map[int]wal.LSN{}}
	l, err := wal.Open(dir, opts)
	if err != nil {
		return run
	}
	defer l.Close()
	id, pending := 0, map[int]wal.LSN{}
	for len(l.Segments()) < 4 || l.Segments()[len(l.Segments())-1].FirstLSN == 0 {
		lsn, c, err := l.Append(powerRecord(id))
		if err == nil {
			err = c.WaitWritten()
		}
		if err != nil {
			return run
		}
		pending[id] = lsn
		id++
	}
	if l.Flush() != nil {
		return run
	}
	run.acked = pending
	segs := l.Segments()
	run.cut = segs[len(segs)-2].FirstLSN
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	res := make(chan error, 1)
	go func() { res <- l.TruncateFront(run.cut) }()
	select {
	case <-g.reached:
	case err := <-res:
		run.truncated = err == nil
		return run
	}
	id = appendWaited(l, run.acked, id, 20)
	g.goOn()
	run.truncated = <-res == nil
	appendWaited(l, run.acked, id, 5) // crash points after TruncateFront returned
	return run
}

// appendWaited appends n records from id on, waiting for each, records
// those reported durable in acked, and returns the next id.
func appendWaited(l *wal.Log, acked map[int]wal.LSN, id, n int) int {
	for range n {
		lsn, c, err := l.Append(powerRecord(id))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			break
		}
		acked[id] = lsn
		id++
	}
	return id
}

// TestPowerLossInOverlappedTruncation: a truncation whose unlinks and
// directory fsyncs run while other callers write, wait and roll. At every
// durable operation, every state a power loss can leave opens with every
// record reported durable at or above the cut, each once, at its LSN, in
// order; FirstLSN never passes the cut, and is the cut once TruncateFront
// returned nil.
func TestPowerLossInOverlappedTruncation(t *testing.T) {
	const states = 40
	opts := wal.Options{Sync: wal.SyncAlways, SegmentSize: 4 << 10, Locked: true}
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		cfs, err := crashfs.New(root, crashAt)
		if err != nil {
			t.Fatal(err)
		}
		g := &unlinkGateFS{FS: cfs, reached: make(chan struct{}), release: make(chan struct{})}
		o := opts
		o.FS = g
		run := overlapWorkload(filepath.Join(root, "log"), &o, g)
		if !cfs.Crashed() {
			if !run.truncated || len(run.acked) < 30 {
				t.Fatalf("no crash, truncated %v, %d records acknowledged", run.truncated, len(run.acked))
			}
			t.Logf("%d durable operations, %d states each", crashAt-1, states)
			return
		}
		if err := cfs.Image(); err != nil {
			t.Fatal(err)
		}
		for s := range states {
			checkOverlapState(t, cfs, crashAt, s, opts.SegmentSize, run)
		}
	}
}

// checkOverlapState materializes state s of cfs's image and checks it
// against run (see TestPowerLossInOverlappedTruncation).
func checkOverlapState(t *testing.T, cfs *crashfs.FS, crashAt, s int, segSize int64, run overlapRun) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state")
	st, err := cfs.Materialize(dst, rand.New(rand.NewPCG(uint64(crashAt), uint64(s))))
	if err != nil {
		t.Fatal(err)
	}
	where := fmt.Sprintf("crash at durable op %d, state %d (%s), cut %d, truncated %v, %d acknowledged",
		crashAt, s, st.Desc, run.cut, run.truncated, len(run.acked))
	state := filepath.Join(dst, "log")
	if _, err := os.Stat(state); err != nil {
		if len(run.acked) > 0 {
			t.Fatalf("%s: the log directory was lost", where)
		}
		return
	}
	l, err := wal.Open(state, &wal.Options{SegmentSize: segSize})
	if err != nil && errors.Is(err, wal.ErrCorrupt) && holeRefusable(state, st) {
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	defer closeLog(t, l)
	first := l.FirstLSN()
	if run.cut > 0 && first > run.cut {
		t.Fatalf("%s: FirstLSN %d is past the cut", where, first)
	}
	if run.truncated && first != run.cut {
		t.Fatalf("%s: FirstLSN %d after TruncateFront(%d) returned nil", where, first, run.cut)
	}
	lsns, recs := readAll(t, l, first)
	seen := map[int]wal.LSN{}
	for i, rec := range recs {
		var id int
		if _, err := fmt.Sscanf(string(rec), "rec-%05d-", &id); err != nil {
			t.Fatalf("%s: record at LSN %d is not one appended", where, lsns[i])
		}
		if at, dup := seen[id]; dup {
			t.Fatalf("%s: record %d read twice, at LSN %d and %d", where, id, at, lsns[i])
		}
		seen[id] = lsns[i]
	}
	for id, lsn := range run.acked {
		if lsn < run.cut {
			continue
		}
		if got, ok := seen[id]; !ok || got != lsn {
			t.Fatalf("%s: acknowledged record %d (LSN %d) read at LSN %d (found %v)", where, id, lsn, got, ok)
		}
	}
}

package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// heldWriteFS is a crash file system that holds the log's first batch write
// until the test releases it, so that the groups appended meanwhile are
// written together in the next batch.
type heldWriteFS struct {
	*crashfs.FS
	held    sync.Once
	entered chan struct{} // closed when the first batch write is held
	let     sync.Once
	release chan struct{} // closed by goOn to let it go on
}

func newHeldWriteFS(fsys *crashfs.FS) *heldWriteFS {
	return &heldWriteFS{FS: fsys, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *heldWriteFS) StoreOp(op string) error {
	if op == wal.StoreWriteBatch {
		g.held.Do(func() {
			close(g.entered)
			<-g.release
		})
	}
	return g.FS.StoreOp(op)
}

// goOn lets the held write go on.
func (g *heldWriteFS) goOn() { g.let.Do(func() { close(g.release) }) }

// TestPowerLossInGroupSpanningRoll: one batch of groups that seals a
// segment and goes on into the next one must reach the new tail only
// after the sealed segment is durable. Were the new tail written first,
// a power loss could keep its entries and lose the sealed segment's end,
// a log that Open refuses (the tail is not the segment after what the
// sealed one holds) though no record lost was reported durable. The
// first record's write is held until the next seven are appended, so the
// second batch holds seven groups of 1500 bytes, the second of which
// seals the first 4 KiB segment and the fifth the next one. At every
// durable operation of the workload, under each sync mode, every state a
// power loss can leave opens, plainly, with every record reported
// durable (by Wait under SyncAlways, by Flush under every mode), in
// order; only a state that kept bytes written after lost ones (a hole,
// which no reader can tell from damage) may be refused, with ErrCorrupt.
func TestPowerLossInGroupSpanningRoll(t *testing.T) {
	for _, mode := range []struct {
		name     string
		sync     wal.SyncMode
		interval time.Duration
	}{
		{"always", wal.SyncAlways, 0},
		{"interval", wal.SyncInterval, time.Nanosecond}, // every write's fsync is due
		{"never", wal.SyncNever, 0},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := wal.Options{Sync: mode.sync, SyncInterval: mode.interval, SegmentSize: 4 << 10,
				MaxGroupBytes: 1024, Locked: true}
			powerLossSpanningRoll(t, opts)
		})
	}
}

// powerLossSpanningRoll runs TestPowerLossInGroupSpanningRoll's workload
// under opts, crashing it at each durable operation in turn.
func powerLossSpanningRoll(t *testing.T, opts wal.Options) {
	const records = 8
	states := raceScaled(40, 4) // at each durable operation, 10 under -race
	torn, refused := 0, 0       // states whose Open cut a torn tail or roll; that it refused for a hole
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		cfs, err := crashfs.New(root, crashAt)
		if err != nil {
			t.Fatal(err)
		}
		fsys := newHeldWriteFS(cfs)
		o := opts
		o.FS = fsys
		durable := spanRollWorkload(filepath.Join(root, "log"), &o, fsys, records)
		if !cfs.Crashed() {
			if durable != records {
				t.Fatalf("no crash, and %d records durable", durable)
			}
			t.Logf("%d durable operations, %d states: %d torn tails cut, %d refused for a hole",
				crashAt-1, (crashAt-1)*states, torn, refused)
			return
		}
		if err := cfs.Image(); err != nil {
			t.Fatal(err)
		}
		for s := range states {
			got := checkZeroState(t, cfs, crashAt, s, opts.SegmentSize, durable)
			if got.refused {
				refused++
			}
			if got.torn {
				torn++
			}
		}
	}
}

// zeroState is what checkZeroState found in one crash state.
type zeroState struct {
	refused bool // Open refused it with ErrCorrupt for a hole it holds
	torn    bool // Open cut a torn tail or roll
}

// checkZeroState materializes state s of cfs's image (crashed at durable
// operation crashAt), opens its log with segSize, and fails t unless the
// log reads at least the first durable records zeroRecord(0), ... in
// order, and nothing else; a missing log directory passes only when no
// record was durable.
func checkZeroState(t *testing.T, cfs *crashfs.FS, crashAt, s int, segSize int64, durable int) zeroState {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state")
	st, err := cfs.Materialize(dst, rand.New(rand.NewPCG(uint64(crashAt), uint64(s))))
	if err != nil {
		t.Fatal(err)
	}
	where := fmt.Sprintf("crash at durable op %d, state %d (%s), %d records durable", crashAt, s, st.Desc, durable)
	state := filepath.Join(dst, "log")
	if _, err := os.Stat(state); err != nil {
		if durable > 0 {
			t.Fatalf("%s: the log directory was lost", where)
		}
		return zeroState{} // no record was durable
	}
	l, err := wal.Open(state, &wal.Options{SegmentSize: segSize})
	if err != nil && errors.Is(err, wal.ErrCorrupt) && st.MayRefuse(dst) {
		return zeroState{refused: true}
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	torn := l.Report().Torn != nil
	_, got := readAll(t, l, 1)
	closeLog(t, l)
	if len(got) < durable {
		t.Fatalf("%s: %d records read", where, len(got))
	}
	for i := range got {
		if !bytes.Equal(got[i], zeroRecord(i)) {
			t.Fatalf("%s: record %d of %d read is not the one appended", where, i+1, len(got))
		}
	}
	return zeroState{torn: torn}
}

// spanRollWorkload opens a log in dir, appends records without waiting,
// the first one's write held until the others are appended, waits for
// each, flushes and closes the log. It returns how many records, from the
// first, were reported durable.
func spanRollWorkload(dir string, opts *wal.Options, fsys *heldWriteFS, records int) int {
	defer fsys.goOn() // the gate never holds a write past the workload
	l, err := wal.Open(dir, opts)
	if err != nil {
		return 0
	}
	var commits []*wal.Commit
	for i := range records {
		if i == 1 { // the first record's write is held now, or the log failed
			select {
			case <-fsys.entered:
			case <-l.Poisoned():
			}
		}
		if _, c, err := l.Append(zeroRecord(i)); err == nil {
			commits = append(commits, c)
		}
	}
	fsys.goOn()
	durable := 0
	for i, c := range commits {
		if c.Wait() == nil && opts.Sync == wal.SyncAlways && durable == i {
			durable++
		}
	}
	if l.Flush() == nil {
		durable = len(commits)
	}
	l.Close()
	return durable
}

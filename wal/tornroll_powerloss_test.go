package wal_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// TestPowerLossBeforeRolledWitness: after a busy spell whose last group
// sealed a segment, the new tail stays empty until the witness comes (up
// to twice witnessBusy later), and until then Open takes damage to the
// sealed segment's last entry for a roll a power loss tore, and cuts it.
// A power loss in that window must not make it cut a record reported
// durable: the roll fsynced the sealed segment before the group's Wait
// returned, so no state the loss can leave tears it. Every state of a
// power loss taken right after the last Wait opens, plain, read-only and
// salvaging, with every record and no cut before the end.
func TestPowerLossBeforeRolledWitness(t *testing.T) {
	const (
		segSize = 4 << 10
		records = 30 // of 1500 bytes, one group each: every third seals a segment
		states  = 60
	)
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "log")
	l := openLog(t, dir, &wal.Options{FS: fsys, Sync: wal.SyncAlways, SegmentSize: segSize, Locked: true})
	for i := range records {
		_, c, err := l.Append(zeroRecord(i))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Image(); err != nil { // the power goes now, before the witness
		t.Fatal(err)
	}
	segs := l.Segments()
	tail := segs[len(segs)-1]
	if len(segs) != records/3+1 || tail.Bytes != 0 {
		t.Fatalf("%d segments, tail of %d bytes: want %d, the last empty (the witness came first?)",
			len(segs), tail.Bytes, records/3+1)
	}
	l.Close() // the image is taken: nothing it does counts

	for s := range states {
		dst := filepath.Join(t.TempDir(), "state")
		if _, err := fsys.Materialize(dst, rand.New(rand.NewPCG(uint64(s), 19))); err != nil {
			t.Fatal(err)
		}
		for _, o := range []struct {
			name string
			opts wal.Options
		}{
			{"plain", wal.Options{SegmentSize: segSize}},
			{"read-only", wal.Options{SegmentSize: segSize, ReadOnly: true}},
			{"salvaging", wal.Options{SegmentSize: segSize, Salvage: true}},
		} {
			state := t.TempDir()
			copyDir(t, filepath.Join(dst, "log"), state)
			where := fmt.Sprintf("state seed %d, %s open", s, o.name)
			opts := o.opts
			l, err := wal.Open(state, &opts)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if d := l.Report().Torn; d != nil && d.LastLSN+1 != d.FirstLSN && (d.FirstLSN == 0 || d.FirstLSN <= records) {
				t.Errorf("%s: cut durable records: %v", where, d)
			}
			if sv := l.Report().Salvaged; len(sv) > 0 {
				t.Errorf("%s: salvaged %v", where, sv)
			}
			_, got := readAll(t, l, 1)
			if len(got) != records {
				t.Errorf("%s: %d records, want the %d reported durable", where, len(got), records)
			}
			for i := range min(len(got), records) {
				if !bytes.Equal(got[i], zeroRecord(i)) {
					t.Errorf("%s: record %d differs", where, i+1)
				}
			}
			closeLog(t, l)
		}
	}
}

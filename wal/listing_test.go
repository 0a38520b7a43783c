package wal_test

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/walq/walq/wal"
)

// listingFS is the real file system, with a hook run on each listing of
// a directory: it may change the directory (as a writer does between two
// listings) or the listing returned (as a listing torn by a writer is).
type listingFS struct {
	wal.OSFS
	mu    sync.Mutex
	calls int
	hook  func(call int, des []os.DirEntry) []os.DirEntry
}

func (f *listingFS) ReadDir(name string) ([]os.DirEntry, error) {
	des, err := f.OSFS.ReadDir(name)
	if err != nil {
		return des, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.hook(f.calls, des), nil
}

// without returns des without the entry named name.
func without(des []os.DirEntry, name string) []os.DirEntry {
	var out []os.DirEntry
	for _, de := range des {
		if de.Name() != name {
			out = append(out, de)
		}
	}
	return out
}

// dirPrint is each file of a flat directory with a hash of its bytes.
func dirPrint(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][32]byte{}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = sha256.Sum256(b)
	}
	return out
}

// TestReadOnlyOpenBesideWriter opens a log read-only while the directory
// changes as a writer changes it: a listing that missed a segment created
// during it (the next listing shows it), a segment removed by TruncateFront
// between the listing and its open. Such an Open reads the log as it was,
// whole; a segment missing from every listing is still damage. A
// read-only Open and Close change no file, not even to finish an
// interrupted truncation.
func TestReadOnlyOpenBesideWriter(t *testing.T) {
	const n = 400
	tests := []struct {
		name string
		// hook gets the segment files, oldest first; removed is the file it
		// removes from the disk, if any.
		hook    func(segs []string) (hook func(int, []os.DirEntry) []os.DirEntry, removed string)
		first   int  // index in segs of the first segment the Open keeps
		corrupt bool // the Open must fail with ErrCorrupt
		refused bool // the Open must fail, not with ErrCorrupt
	}{
		{name: "listing missed a segment once", hook: func(segs []string) (func(int, []os.DirEntry) []os.DirEntry, string) {
			hidden := filepath.Base(segs[len(segs)-2])
			return func(call int, des []os.DirEntry) []os.DirEntry {
				if call == 1 {
					return without(des, hidden)
				}
				return des
			}, ""
		}},
		{name: "segment removed after the listing", first: 1, hook: func(segs []string) (func(int, []os.DirEntry) []os.DirEntry, string) {
			return func(call int, des []os.DirEntry) []os.DirEntry {
				if call == 1 {
					if err := os.Remove(segs[0]); err != nil {
						panic(err)
					}
				}
				return des
			}, segs[0]
		}},
		{name: "truncation interrupted", first: 2, hook: func(segs []string) (func(int, []os.DirEntry) []os.DirEntry, string) {
			// TruncateFront had marked the segments before segs[2] for
			// removal: a read-only Open obeys the mark, and leaves it.
			if err := os.WriteFile(segs[2]+".FRONT", nil, 0o600); err != nil {
				panic(err)
			}
			return func(_ int, des []os.DirEntry) []os.DirEntry { return des }, ""
		}},
		{name: "segment missing from every listing", corrupt: true, hook: func(segs []string) (func(int, []os.DirEntry) []os.DirEntry, string) {
			hidden := filepath.Base(segs[len(segs)/2])
			return func(_ int, des []os.DirEntry) []os.DirEntry { return without(des, hidden) }, ""
		}},
		{name: "every first listing torn", refused: true, hook: func(segs []string) (func(int, []os.DirEntry) []os.DirEntry, string) {
			hidden := filepath.Base(segs[len(segs)/2])
			return func(call int, des []os.DirEntry) []os.DirEntry {
				if call%2 == 1 {
					return without(des, hidden)
				}
				return des
			}, ""
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{SegmentSize: 1 << 10})
			for i := 0; i < n; i += 5 {
				appendN(t, l, i, 5) // an entry or two each: many segments
			}
			closeLog(t, l)
			segs := segmentFiles(t, dir)
			if len(segs) < 5 {
				t.Fatalf("%d segments, want at least 5", len(segs))
			}
			firstLSN := layoutOf(t, dir)[0].first
			keep := firstOf(layoutOf(t, dir), segs[tc.first]).first
			hook, removed := tc.hook(segs)
			before := dirPrint(t, dir)
			r, err := wal.Open(dir, &wal.Options{ReadOnly: true, FS: &listingFS{hook: hook}})
			switch {
			case tc.corrupt:
				if !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Open with a segment missing: %v, want ErrCorrupt", err)
				}
			case tc.refused:
				if err == nil || errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Open under a writer that tears every listing: %v, want a refusal that is not ErrCorrupt", err)
				}
			default:
				if err != nil {
					t.Fatalf("read-only Open beside a writer: %v", err)
				}
				if r.FirstLSN() != keep {
					t.Fatalf("FirstLSN %d, want %d", r.FirstLSN(), keep)
				}
				checkRecords(t, r, keep, int(keep-firstLSN), n-int(keep-firstLSN))
				closeLog(t, r)
			}
			delete(before, filepath.Base(removed))
			after := dirPrint(t, dir)
			if len(after) != len(before) {
				t.Fatalf("read-only Open left %d files, want %d", len(after), len(before))
			}
			for name, sum := range before {
				if after[name] != sum {
					t.Fatalf("read-only Open changed or removed %s", name)
				}
			}
		})
	}
}

// TestReadOnlyOpenTornListingThenTruncation: the first listing missed a
// segment near the tail (torn), and before the listing was checked the
// writer's TruncateFront removed every segment up to and including the
// one missed, so the second listing no longer showed the hole: the Open
// went on with the files it had opened, a segment short, and reported the
// healthy log corrupt. A front that moved while the Open listed makes it
// list again.
func TestReadOnlyOpenTornListingThenTruncation(t *testing.T) {
	const n = 400
	dir, segs := smallSegmentsLog(t, n)
	lay := layoutOf(t, dir)
	firstLSN, keep := lay[0].first, firstOf(lay, segs[len(segs)-1]).first
	hidden := filepath.Base(segs[len(segs)-2])
	hook := func(call int, des []os.DirEntry) []os.DirEntry {
		switch call {
		case 1:
			return without(des, hidden) // torn: the segment was created during the listing
		case 2:
			for _, seg := range segs[:len(segs)-1] { // TruncateFront keeps the tail alone
				if err := os.Remove(seg); err != nil {
					panic(err)
				}
			}
			des, err := os.ReadDir(dir)
			if err != nil {
				panic(err)
			}
			return des
		}
		return des
	}
	r, err := wal.Open(dir, &wal.Options{ReadOnly: true, FS: &listingFS{hook: hook}})
	if err != nil {
		t.Fatalf("read-only Open beside a writer that truncated the front: %v", err)
	}
	defer closeLog(t, r)
	if r.FirstLSN() != keep {
		t.Fatalf("FirstLSN %d, want %d", r.FirstLSN(), keep)
	}
	checkRecords(t, r, keep, int(keep-firstLSN), n-int(keep-firstLSN))
}

// TestReadOnlyOpenFrontMovedWithoutHole: the writer's TruncateFront moved
// the front between the two listings, and the first listing had no hole.
// The Open listed a third and fourth time, needlessly; under a writer that
// truncates often, one Open in ten did. It now drops the segments it
// opened below the new front and keeps the rest: two listings.
func TestReadOnlyOpenFrontMovedWithoutHole(t *testing.T) {
	const n = 400
	dir, segs := smallSegmentsLog(t, n)
	lay := layoutOf(t, dir)
	firstLSN, keep := lay[0].first, firstOf(lay, segs[2]).first
	fsys := &listingFS{hook: func(call int, des []os.DirEntry) []os.DirEntry {
		if call != 2 {
			return des
		}
		for _, seg := range segs[:2] { // TruncateFront, between the listings
			if err := os.Remove(seg); err != nil {
				panic(err)
			}
		}
		des, err := os.ReadDir(dir)
		if err != nil {
			panic(err)
		}
		return des
	}}
	r, err := wal.Open(dir, &wal.Options{ReadOnly: true, FS: fsys})
	if err != nil {
		t.Fatalf("read-only Open beside a writer that truncated the front: %v", err)
	}
	defer closeLog(t, r)
	if fsys.calls != 2 {
		t.Fatalf("%d listings, want 2: a front that moved without a hole is no reason to list again", fsys.calls)
	}
	if r.FirstLSN() != keep {
		t.Fatalf("FirstLSN %d, want %d", r.FirstLSN(), keep)
	}
	checkRecords(t, r, keep, int(keep-firstLSN), n-int(keep-firstLSN))
}

// smallSegmentsLog writes n records in groups of five to a new log of
// 1 KiB segments, closes it, and returns its directory and segment files
// (at least five).
func smallSegmentsLog(t *testing.T, n int) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 1 << 10})
	for i := 0; i < n; i += 5 { // one group each: the layout does not rest on the committer's timing
		recs := make([][]byte, 0, 5)
		for j := i; j < min(i+5, n); j++ {
			recs = append(recs, record(j))
		}
		_, c, err := l.AppendAll(recs, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	if len(segs) < 5 {
		t.Fatalf("%d segments, want at least 5", len(segs))
	}
	if fi, err := os.Stat(segs[len(segs)-1]); err != nil || fi.Size() == 0 {
		t.Fatalf("the tail holds no entry (%v): the tests need one", err)
	}
	return dir, segs
}

package wal_test

import (
	"errors"
	"testing"
	"time"

	"github.com/walq/walq/wal"
)

var syncModes = []struct {
	name string
	sync wal.SyncMode
}{{"SyncNever", wal.SyncNever}, {"SyncAlways", wal.SyncAlways}}

// within waits for ch, or fails the test after d with what.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
	}
}

// heldTruncation opens a log on a gateFS over the real file system with three segments or more,
// arms the gate and starts TruncateFront at the last sealed segment's
// first LSN, in a goroutine, once it is held at the gate. It returns the
// log, the gate and TruncateFront's result.
func heldTruncation(t *testing.T, sync wal.SyncMode, at string) (*wal.Log, *gateFS, wal.LSN, <-chan error) {
	t.Helper()
	g := newGateFS(wal.OSFS{}, at)
	l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 4 << 10, Sync: sync, FS: g})
	segs := fillSegments(t, l, 3)
	cut := segs[len(segs)-2].FirstLSN
	return l, g, cut, truncateHeld(t, l, g, cut, "the gate")
}

// TestTruncateFrontLetsWritersWrite: a truncation held inside its unlink
// or its directory fsync (a slow disk) must not stop the other callers:
// Append and Commit.Wait complete meanwhile, under SyncNever and
// SyncAlways, and the truncation then ends as usual.
func TestTruncateFrontLetsWritersWrite(t *testing.T) {
	for _, mode := range syncModes {
		for _, at := range []string{"unlink", "dirsync"} {
			sync := mode.sync
			t.Run(mode.name+"/"+at, func(t *testing.T) {
				l, g, cut, res := heldTruncation(t, sync, at)
				defer closeLog(t, l)
				wrote := make(chan struct{})
				var lsn wal.LSN
				var err error
				go func() {
					defer close(wrote)
					var c *wal.Commit
					if lsn, c, err = l.Append([]byte("during the truncation")); err == nil {
						err = c.Wait()
					}
				}()
				select {
				case <-wrote:
				case <-time.After(5 * time.Second):
					g.release(nil)
					t.Fatalf("Append + Wait blocked for 5 s by a truncation held in its %s", at)
				}
				if err != nil {
					t.Fatal(err)
				}
				if sync == wal.SyncAlways && l.DurableLSN() < lsn {
					t.Fatalf("Wait returned with DurableLSN %d < %d", l.DurableLSN(), lsn)
				}
				if got := l.FirstLSN(); got >= cut {
					t.Fatalf("FirstLSN %d before the truncation returned, cut at %d", got, cut)
				}
				g.release(nil)
				if err := <-res; err != nil {
					t.Fatal(err)
				}
				if got := l.FirstLSN(); got != cut {
					t.Fatalf("FirstLSN %d after TruncateFront(%d)", got, cut)
				}
				if _, err := l.Read(lsn); err != nil {
					t.Fatalf("Read(%d) after the truncation: %v", lsn, err)
				}
			})
		}
	}
}

// TestTruncateFrontFailureOverlappedPoisons: an unlink or directory fsync
// that fails while other callers write poisons the Log: TruncateFront,
// the next Append or Wait, and Close return the error.
func TestTruncateFrontFailureOverlappedPoisons(t *testing.T) {
	for _, mode := range syncModes {
		for _, at := range []string{"unlink", "dirsync"} {
			sync := mode.sync
			t.Run(mode.name+"/"+at, func(t *testing.T) {
				l, g, _, res := heldTruncation(t, sync, at)
				appendN(t, l, 0, 3) // written while the truncation is held
				injected := errors.New("injected " + at + " failure")
				g.release(injected)
				if err := <-res; !errors.Is(err, injected) {
					t.Fatalf("TruncateFront: %v, want the injected failure", err)
				}
				if !errors.Is(l.Err(), injected) {
					t.Fatalf("Err: %v, want the injected failure", l.Err())
				}
				_, c, err := l.Append([]byte("after"))
				if err == nil {
					err = c.Wait()
				}
				if !errors.Is(err, injected) {
					t.Fatalf("Append + Wait after the failure: %v, want the injected failure", err)
				}
				if err := l.Close(); !errors.Is(err, injected) {
					t.Fatalf("Close: %v, want the injected failure", err)
				}
			})
		}
	}
}

// TestCloseWaitsForTruncation: Close during a held truncation waits for
// it, and returns its failure.
func TestCloseWaitsForTruncation(t *testing.T) {
	l, g, _, res := heldTruncation(t, wal.SyncNever, "dirsync")
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v while the truncation was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	injected := errors.New("injected dirsync failure")
	g.release(injected)
	if err := <-res; !errors.Is(err, injected) {
		t.Fatalf("TruncateFront: %v, want the injected failure", err)
	}
	if err := <-closed; !errors.Is(err, injected) {
		t.Fatalf("Close: %v, want the truncation's failure", err)
	}
}

// TestReadBelowCutDuringTruncation: while a truncation is held after its
// unlinks (in its directory fsync), the records below the cut are still
// listed: Read and a Reader return each one appended there, at its LSN,
// from the handles the Log holds open, or ErrNotFound; never an error of
// another kind nor another record. Once TruncateFront returned, they get
// ErrNotFound.
func TestReadBelowCutDuringTruncation(t *testing.T) {
	for _, mode := range syncModes {
		t.Run(mode.name, func(t *testing.T) {
			l, g, cut, res := heldTruncation(t, mode.sync, "dirsync")
			defer closeLog(t, l)
			r := l.NewReader(1)
			for lsn := wal.LSN(1); lsn < cut; lsn++ {
				got, err := l.Read(lsn)
				if err != nil && !errors.Is(err, wal.ErrNotFound) {
					t.Fatalf("Read(%d) during the truncation: %v", lsn, err)
				}
				if err == nil && string(got) != string(record(int(lsn)-1)) {
					t.Fatalf("Read(%d) during the truncation returned %.20q, want %.20q", lsn, got, record(int(lsn)-1))
				}
				at, rec, err := r.Next()
				if err != nil && !errors.Is(err, wal.ErrNotFound) {
					t.Fatalf("Reader.Next at %d during the truncation: %v", lsn, err)
				}
				if err == nil && (at != lsn || string(rec) != string(record(int(lsn)-1))) {
					t.Fatalf("Reader.Next during the truncation returned %.20q at LSN %d, want %.20q at %d", rec, at, record(int(lsn)-1), lsn)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			g.release(nil)
			if err := <-res; err != nil {
				t.Fatal(err)
			}
			if _, err := l.Read(cut - 1); !errors.Is(err, wal.ErrNotFound) {
				t.Fatalf("Read(%d) below the cut %d after TruncateFront: %v, want ErrNotFound", cut-1, cut, err)
			}
			if _, _, err := l.NewReader(1).Next(); !errors.Is(err, wal.ErrNotFound) {
				t.Fatalf("Reader from 1 after TruncateFront(%d): %v, want ErrNotFound", cut, err)
			}
		})
	}
}

// TestTruncationsDoNotOverlap: a second TruncateFront called while a
// first is held in its unlink waits for it, rather than removing the
// files the first is about to remove (whose unlink would then fail and
// poison the Log); both succeed, and the log then starts at the second
// cut with no error.
func TestTruncationsDoNotOverlap(t *testing.T) {
	l, g, cut, res := heldTruncation(t, wal.SyncNever, "unlink")
	defer closeLog(t, l)
	segs := l.Segments()
	cut2 := segs[len(segs)-1].FirstLSN
	if cut2 <= cut {
		t.Fatalf("tail starts at %d, not after the cut %d", cut2, cut)
	}
	second := make(chan error, 1)
	go func() { second <- l.TruncateFront(cut2) }()
	time.Sleep(100 * time.Millisecond) // the second is then waiting, or done
	g.release(nil)
	if err := <-res; err != nil {
		t.Fatalf("first TruncateFront(%d): %v", cut, err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second TruncateFront(%d): %v", cut2, err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err after both truncations: %v", err)
	}
	if got := l.FirstLSN(); got != cut2 {
		t.Fatalf("FirstLSN %d after TruncateFront(%d)", got, cut2)
	}
	if got := l.Segments()[0].FirstLSN; got != cut2 {
		t.Fatalf("first segment starts at %d after TruncateFront(%d)", got, cut2)
	}
	if got, err := l.Read(cut2); err != nil || string(got) != string(record(int(cut2)-1)) {
		t.Fatalf("Read(%d): %.20q, %v; want %.20q", cut2, got, err, record(int(cut2)-1))
	}
}

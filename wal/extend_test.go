package wal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/wal"
)

// writtenEnd returns the offset after the last entry of the segment file
// at path, and the file's bytes.
func writtenEnd(t *testing.T, dir, path string) (int64, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(0)
	for _, e := range layoutOf(t, dir) {
		if e.seg == path {
			end = e.off + e.size
		}
	}
	return end, b
}

// TestTailExtendedWithZeros: while a log is open, its tail file reaches
// past the last entry with zeros (made durable by the fsync of the
// records that overwrite them next), so that a record's fdatasync carries no new file
// size; Close cuts them, and the log ends at its last entry.
func TestTailExtendedWithZeros(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
	appendN(t, l, 0, 100)
	tail := segmentFiles(t, dir)[0]
	end, b := writtenEnd(t, dir, tail)
	if int64(len(b))-end < 4096 {
		t.Fatalf("tail holds %d bytes, its entries end at %d: no zeros ahead of the entries", len(b), end)
	}
	if bytes.ContainsFunc(b[end:], func(r rune) bool { return r != 0 }) {
		t.Fatalf("the bytes after the last entry, at %d, are not zeros", end)
	}
	closeLog(t, l)
	// The log may have written a witness (26 bytes) after the first look,
	// once it stayed idle: the entries end there or later, never before.
	if end2, b := writtenEnd(t, dir, tail); int64(len(b)) != end2 || end2 < end {
		t.Fatalf("after Close the tail holds %d bytes, its entries end at %d (%d before Close): the zeros were not cut", len(b), end2, end)
	}
	l = openLog(t, dir, nil)
	defer closeLog(t, l)
	if rep := l.Report(); rep.Torn != nil {
		t.Fatalf("Open after Close reports a torn tail: %+v", rep.Torn)
	}
	checkRecords(t, l, 1, 0, 100)
}

// TestRollCutsSealedZeros: a roll leaves the sealed segment ending at its
// last entry, and the new tail is extended in turn.
func TestRollCutsSealedZeros(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{Sync: wal.SyncAlways, SegmentSize: 60000} // not a whole number of pages
	l := openLog(t, dir, opts)
	rec := bytes.Repeat([]byte("r"), 1000)
	for i := range 300 {
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want 3 at least", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		if end, b := writtenEnd(t, dir, s); int64(len(b)) != end {
			t.Fatalf("sealed %s holds %d bytes, its last entry ends at %d", filepath.Base(s), len(b), end)
		}
	}
	if end, b := writtenEnd(t, dir, segs[len(segs)-1]); int64(len(b)) <= end {
		t.Fatalf("the tail after a roll holds %d bytes, its entries end at %d: not extended", len(b), end)
	}
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	if _, err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	if l.WrittenLSN() != 300 {
		t.Fatalf("WrittenLSN %d, want 300", l.WrittenLSN())
	}
}

// TestReadOnlyBesideExtendedTail: a read-only open of a live, idle log,
// whose tail holds zeros past its entries, takes them for the end of the log:
// no torn tail, no damage for Verify, and its Readers deliver the records
// alone.
func TestReadOnlyBesideExtendedTail(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
	defer closeLog(t, l)
	appendN(t, l, 0, 50)
	if err := l.Flush(); err != nil { // the witness written: the log stays idle, no write in flight
		t.Fatal(err)
	}
	ro := openLog(t, dir, &wal.Options{ReadOnly: true})
	defer closeLog(t, ro)
	if rep := ro.Report(); rep.Torn != nil || len(rep.Salvaged) > 0 {
		t.Fatalf("read-only Open reports damage: Torn %+v, Salvaged %+v", rep.Torn, rep.Salvaged)
	}
	if rep, err := ro.Verify(); err != nil || rep.Torn != nil {
		t.Fatalf("Verify of the read-only Log: %v, Torn %+v", err, rep.Torn)
	}
	checkRecords(t, ro, 1, 0, 50)
}

// TestExtenderFailurePoisons: a failed write, fsync or truncate of the
// zeros ahead of the tail poisons the log, as any failed write does.
func TestExtenderFailurePoisons(t *testing.T) {
	for _, kind := range []string{"write", "fsync", "truncate"} {
		t.Run(kind, func(t *testing.T) {
			fs := faultfs.New(0)
			l, err := wal.Open(t.TempDir(), &wal.Options{FS: fs, Sync: wal.SyncAlways})
			if err != nil {
				t.Fatal(err)
			}
			if kind != "truncate" {
				fs.FailNext(kind) // the zeros' write (tidwall/wal writes the record around FS), or the fsync that covers them and the record
			}
			_, c, err := l.Append([]byte("x"))
			if err == nil {
				err = c.Wait()
			}
			if kind == "truncate" {
				if err != nil {
					t.Fatal(err)
				}
				fs.FailNext(kind) // Close's cut of the zeros
				if err := l.Close(); !errors.Is(err, faultfs.ErrInjected) {
					t.Fatalf("Close after a failed cut of the zeros: %v, want the injected failure", err)
				}
				return
			}
			defer l.Close()
			if !errors.Is(err, faultfs.ErrInjected) && !errors.Is(l.Err(), faultfs.ErrInjected) {
				t.Fatalf("after a failed %s of the zeros: Wait %v, Err %v; want the log poisoned", kind, err, l.Err())
			}
			if _, _, err := l.Append([]byte("y")); err == nil {
				t.Fatalf("Append after a failed %s of the zeros succeeded", kind)
			}
		})
	}
}

// TestZerosStopAtSegmentSize: the zeros ahead of the tail never reach
// past SegmentSize, where the segment's last entry ends at the latest
// (tidwall/wal rolls at the entry that takes it there). So no sealed
// segment is left holding zeros after its last entry: a crash that lost
// a roll's cut of them would leave them in a segment Open does not trim
// when the same batch rolled again, and Open would refuse the log
// ("LSN discontinuity").
func TestZerosStopAtSegmentSize(t *testing.T) {
	dir := t.TempDir()
	const segSize = 60000 // not a whole number of pages
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways, SegmentSize: segSize})
	defer closeLog(t, l)
	rec := bytes.Repeat([]byte("r"), 1000)
	for i := range 200 {
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		segs := segmentFiles(t, dir)
		tail := segs[len(segs)-1]
		end, b := writtenEnd(t, dir, tail)
		if int64(len(b)) > max(end, segSize) {
			t.Fatalf("after record %d the tail %s holds %d bytes, its entries end at %d: zeros past SegmentSize %d",
				i+1, filepath.Base(tail), len(b), end, segSize)
		}
	}
}

// TestNoZerosWithoutSyncAlways: under SyncNever and SyncInterval the
// tail is written by appending alone. Under SyncNever no fsync is saved
// by zeros ahead; under SyncInterval one per interval is, and their own
// write and fdatasync on the committer's path cost more than that.
func TestNoZerosWithoutSyncAlways(t *testing.T) {
	for name, mode := range map[string]wal.SyncMode{"never": wal.SyncNever, "interval": wal.SyncInterval} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{Sync: mode})
			appendN(t, l, 0, 100)
			tail := segmentFiles(t, dir)[0]
			if end, b := writtenEnd(t, dir, tail); int64(len(b)) != end {
				t.Fatalf("the tail holds %d bytes, its entries end at %d: zeros written ahead", len(b), end)
			}
			closeLog(t, l)
		})
	}
}

// TestNoFsyncOfZerosAlone: under SyncAlways an extension costs no fsync
// of its own. Its zeros are written by the fsync job that makes records
// durable, and that fdatasync covers them, so no caller's Wait spans an
// fsync of zeros alone: between two fsyncs of the tail the log writes
// records.
func TestNoFsyncOfZerosAlone(t *testing.T) {
	fs := faultfs.New(0)
	dir := t.TempDir()
	l, err := wal.Open(dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog(t, l)
	from := len(fs.Ops())
	rec := bytes.Repeat([]byte("r"), 1000)
	for i := range 2500 { // 2.5 MB of entries: an extension per 768 KiB-1 MiB
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	ops := fs.Ops()[from:]
	zeros, fsyncs, written := 0, 0, false
	for i, op := range ops {
		switch {
		case op.Kind == wal.StoreWriteBatch:
			written = true
		case op.Kind == "write":
			zeros++
		case op.Kind == "fsync":
			if !written {
				t.Fatalf("operation %d, an fsync of %s, follows the fsync before it with no record written: an fsync of zeros alone (ops %v)",
					i, filepath.Base(op.Path), ops[max(0, i-4):i+1])
			}
			fsyncs++
			written = false
		}
	}
	if zeros < 3 {
		t.Fatalf("%d writes of zeros for 2.5 MB of entries, want 3 at least", zeros)
	}
	if fsyncs != 2500 {
		t.Fatalf("%d fsyncs for 2500 records each waited for alone, want 2500", fsyncs)
	}
}

// heldZerosFS is the real file system, except that the first write
// through a file opened write-only (the extender's, which writes the zeros
// ahead of the tail) waits until release is closed. It logs, in order,
// the store's batch writes and the end of that write.
type heldZerosFS struct {
	wal.OSFS
	entered chan struct{} // closed when the held write begins
	release chan struct{} // closed by the test to let it go on
	fail    error         // the held write's outcome once released; nil: it writes

	mu     sync.Mutex
	events []string
	held   bool
}

func (f *heldZerosFS) log(ev string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
}

func (f *heldZerosFS) StoreOp(op string) error {
	if op == wal.StoreWriteBatch {
		f.log("batch")
	}
	return nil
}

func (f *heldZerosFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil || flag != os.O_WRONLY {
		return file, err
	}
	return &heldZerosFile{File: file, fs: f}, nil
}

type heldZerosFile struct {
	wal.File
	fs *heldZerosFS
}

func (h *heldZerosFile) WriteAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	first := !h.fs.held
	h.fs.held = true
	h.fs.mu.Unlock()
	if !first {
		return h.File.WriteAt(p, off)
	}
	close(h.fs.entered)
	<-h.fs.release
	if h.fs.fail != nil {
		h.fs.log("zeros failed")
		return 0, h.fs.fail
	}
	n, err := h.File.WriteAt(p, off)
	h.fs.log("zeros")
	return n, err
}

// TestWriteWaitsForZerosInFlight: a group written while an fsync job is
// still writing the zeros ahead of the tail (a WaitWritten caller's,
// written at once) waits for them when it reaches past their start:
// written first, it would be overwritten by them, and its records read
// back as zeros.
func TestWriteWaitsForZerosInFlight(t *testing.T) {
	dir := t.TempDir()
	fs := &heldZerosFS{entered: make(chan struct{}), release: make(chan struct{})}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	defer closeLog(t, l)
	first := make(chan error, 1)
	go func() { // its fsync job writes the first zeros, and is held there
		_, c, err := l.Append(record(0))
		if err == nil {
			err = c.Wait()
		}
		first <- err
	}()
	<-fs.entered
	second := make(chan error, 1)
	go func() {
		_, c, err := l.Append(record(1))
		if err == nil {
			err = c.WaitWritten()
		}
		second <- err
	}()
	// Give a write that does not wait the time to land before the zeros;
	// the outcome below does not depend on how long this is.
	time.Sleep(50 * time.Millisecond)
	close(fs.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	events := strings.Join(fs.events, ",")
	fs.mu.Unlock()
	if events != "batch,zeros,batch" {
		t.Fatalf("events %s, want batch,zeros,batch: the second group was written before the zeros it reaches into", events)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, l, 1, 0, 2)
}

// holdZeros appends record 0 and waits for it in the background, and
// returns once its fsync job is held in the write of the first zeros;
// the channel gets the Wait's outcome.
func holdZeros(t *testing.T, l *wal.Log, fs *heldZerosFS) <-chan error {
	t.Helper()
	first := make(chan error, 1)
	go func() {
		_, c, err := l.Append(record(0))
		if err == nil {
			err = c.Wait()
		}
		first <- err
	}()
	<-fs.entered
	return first
}

// TestRollWaitsForZerosInFlight: a group written while the zeros are in
// flight that rolls the segment waits for them, so that they neither
// land on its entries nor stay in the sealed segment, which the roll cuts
// to its last entry.
func TestRollWaitsForZerosInFlight(t *testing.T) {
	const n, segSize = 300, 8 << 10 // records 1-299 fill more than a segment
	dir := t.TempDir()
	fs := &heldZerosFS{entered: make(chan struct{}), release: make(chan struct{})}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways, SegmentSize: segSize})
	first := holdZeros(t, l, fs)
	second := make(chan error, 1)
	go func() {
		var c *wal.Commit
		var err error
		for i := 1; i < n && err == nil; i++ {
			_, c, err = l.Append(record(i))
		}
		if err == nil {
			err = c.WaitWritten()
		}
		second <- err
	}()
	time.Sleep(50 * time.Millisecond) // the outcome does not depend on how long
	close(fs.release)
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("%d segment files, want a roll", len(segs))
	}
	if end, b := writtenEnd(t, dir, segs[0]); int64(len(b)) != end {
		t.Fatalf("the sealed %s holds %d bytes, its entries end at %d", filepath.Base(segs[0]), len(b), end)
	}
	checkRecords(t, l, 1, 0, n)
	closeLog(t, l)
	l = openLog(t, dir, &wal.Options{Sync: wal.SyncAlways, SegmentSize: segSize})
	defer closeLog(t, l)
	checkRecords(t, l, 1, 0, n)
}

// TestCloseWaitsForZerosInFlight: Close while the zeros are in flight
// waits for them before it cuts the tail to its last entry, so that no
// zeros land after the cut.
func TestCloseWaitsForZerosInFlight(t *testing.T) {
	dir := t.TempDir()
	fs := &heldZerosFS{entered: make(chan struct{}), release: make(chan struct{})}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	first := holdZeros(t, l, fs)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	time.Sleep(50 * time.Millisecond) // the outcome does not depend on how long
	close(fs.release)
	for _, ch := range []<-chan error{first, closed} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	tail := segmentFiles(t, dir)[0]
	if end, b := writtenEnd(t, dir, tail); int64(len(b)) != end {
		t.Fatalf("after Close the tail holds %d bytes, its entries end at %d: zeros after the cut", len(b), end)
	}
	l = openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
	defer closeLog(t, l)
	checkRecords(t, l, 1, 0, 1)
}

// TestFailedZerosInFlightFailTheirWaiters: when the zeros' write fails,
// the commit its fsync job covers, a group that waited for the zeros to
// be written and a commit waiting for the next fsync all fail, and the
// log stays poisoned: none of them returns nil.
func TestFailedZerosInFlightFailTheirWaiters(t *testing.T) {
	dir := t.TempDir()
	fail := errors.New("injected zeros failure")
	fs := &heldZerosFS{entered: make(chan struct{}), release: make(chan struct{}), fail: fail}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	first := holdZeros(t, l, fs)
	written, durable := make(chan error, 1), make(chan error, 1)
	for i, ch := range []chan error{written, durable} {
		go func() {
			_, c, err := l.Append(record(1 + i))
			if err == nil && ch == written {
				err = c.WaitWritten()
			} else if err == nil {
				err = c.Wait()
			}
			ch <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // lets the other two reach the log; the outcome does not depend on it
	close(fs.release)
	for name, ch := range map[string]<-chan error{"the held job's Wait": first, "WaitWritten": written, "Wait": durable} {
		if err := <-ch; !errors.Is(err, fail) {
			t.Errorf("%s: %v, want the zeros' failure", name, err)
		}
	}
	if err := l.Err(); !errors.Is(err, fail) {
		t.Errorf("Err: %v, want the zeros' failure", err)
	}
	if err := l.Close(); err == nil {
		t.Error("Close of a log whose zeros failed: <nil>")
	}
}

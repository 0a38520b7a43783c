package wal

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walq/walq/internal/dirlock"
)

// Log is a write-ahead log in one directory. See the package documentation
// for its guarantees and concurrency rules.
type Log struct {
	dir  string
	opts Options // resolved at Open; immutable

	// mu guards the append side. It is held only to copy a record into the
	// open group, so Append stays cheap.
	mu struct {
		sync.Mutex
		open    *group   // group receiving records; nil when none
		sealed  []*group // full groups waiting for the committer, in LSN order
		free    []*group // written groups handed back by the committer, for reuse with their buffers
		bare    []*group // more of them, without their buffers
		commits []Commit // Commits not handed out yet (newCommitLocked)
		nextLSN LSN      // LSN the next record gets
		closed  bool     // Close was called
		err     error    // sticky write/fsync failure; nil while healthy
	}

	// seg guards the segment list and every segment's mutable fields. The
	// committer takes it for writing to publish entries and rolls, and
	// truncation to drop segments; readers take it for reading to find a
	// segment, learn how far they may read and pin its file.
	seg struct {
		sync.RWMutex
		list []*segment // ascending by first index; the last one is the tail
	}

	firstLSN   atomic.Uint64 // first LSN in the log; stored under seg
	writtenLSN atomic.Uint64 // last LSN in the segment files; stored by the committer under seg
	durableLSN atomic.Uint64 // last LSN covered by an fsync; only raised, by advanceDurable
	closed     atomic.Bool   // set by Close; makes Readers and Read return ErrClosed
	poisoned   atomic.Bool   // set with mu.err; read by the committer and Err without mu
	poisonedC  chan struct{} // closed when mu.err is set (Poisoned)

	report    Report     // what Open cut or skipped; immutable after Open
	cut       *tailCut   // Open: the torn tail, or the zeros after the tail's entries, to cut once every check passed; nil when none
	sealedCut *tailCut   // Open: the zeros after the last sealed segment's last entry (a roll's cut a crash lost), cut with cut; nil when none
	dropTail  string     // Open: the segment after a torn roll, removed before the cut; "" when none
	gap       LSN        // Open under Salvage: records were lost at the log's end (it ended before MustReach, or a torn roll's end could have held synced ones), the next LSN is this; 0 when not
	tornNone  bool       // Open: the torn tail is a witness alone at its segment's start, which lost no LSN (handleTailDamage)
	tornEnd   bool       // Open under Salvage: the torn roll cut bears no torn mark, so the LSNs its bytes can hold are taken as lost (boundTornEnd)
	resume    LSN        // Open under Salvage: the LSN after all a damaged region past the last record can have held; 0 when none
	cache     entryCache // recently decoded entries, for Read
	readers   sync.Pool  // *segReader with an indexSpacing read-ahead, for Read

	wake   chan struct{} // capacity 1: groups are waiting for the committer
	reqs   chan request  // Flush and TruncateFront requests to the committer
	stop   chan struct{} // closed by Close to stop the committer
	exited chan struct{} // closed by the committer when it returns
	c      *committer    // nil when read-only; owned by its goroutine
	lock   *dirlock.Lock // the directory's lock; nil when read-only or Options.Locked

	// truncating is held by TruncateFront for the whole truncation, so
	// that two never overlap, and by Close, which waits for a running one
	// before it stops the committer (truncate.go).
	truncating sync.Mutex

	metrics syncMetrics // fsync latencies and sizes, bumped by the syncer (metrics.go)
}

// Open opens the log in dir, creating the directory if needed (unless
// read-only). It cuts a torn tail of the last segment back to the last
// whole entry and reports the cut in Report; damage anywhere else is
// ErrCorrupt unless opts.Salvage is set. A nil opts means defaults.
func Open(dir string, opts *Options) (*Log, error) {
	return open(dir, opts, faults{})
}

func open(dir string, opts *Options, f faults) (*Log, error) {
	o, err := resolveOptions(opts)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: o, wake: make(chan struct{}, 1), poisonedC: make(chan struct{}),
		reqs: make(chan request), stop: make(chan struct{}), exited: make(chan struct{})}
	l.readers.New = func() any { return &segReader{ahead: indexSpacing} }
	// 1. Lock the directory; find and open the segments, finishing an
	//    interrupted truncation first.
	if err := l.openListed(); err != nil {
		l.releaseAll()
		return nil, err
	}
	// 2. Check the tail and learn where every segment starts; check the
	//    shape of the log; only then cut a torn tail (so that a log that
	//    fails a check is left as it was).
	if err := l.load(); err != nil {
		l.releaseAll()
		return nil, err
	}
	if err := l.repair(); err != nil {
		l.releaseAll()
		return nil, err
	}
	if o.ReadOnly {
		close(l.exited) // no committer: requests get ErrClosed
		err = l.setLSNs()
	} else {
		// 3. Hand the directory to tidwall/wal and start the committer.
		err = l.startCommitter(f)
	}
	if err != nil {
		l.releaseAll()
		return nil, err
	}
	return l, nil
}

// listSegments prepares the directory and returns its segments.
func (l *Log) listSegments() ([]segName, error) {
	if !l.opts.ReadOnly {
		if err := MkdirAll(l.opts.FS, l.dir, l.opts.DirMode); err != nil {
			return nil, fmt.Errorf("wal: create %s: %w", l.dir, err)
		}
		var err error
		if !l.opts.Locked {
			if l.lock, err = lockDir(l.dir, l.opts.FileMode); err != nil {
				return nil, err
			}
		}
	}
	d, err := listDir(l.opts.FS, l.dir)
	if err == nil {
		err = foreign(l.opts.FS, d)
	}
	if err != nil || l.opts.ReadOnly {
		return d.effective(), err
	}
	return prepareDir(l.opts.FS, l.dir, d)
}

// openSegments opens the listed segments and learns their sizes.
func (l *Log) openSegments(names []segName) error {
	for _, n := range names {
		file, err := openSegFile(l.opts.FS, n.path)
		if err != nil {
			return err
		}
		s := &segment{path: n.path, firstIndex: n.index, file: file}
		l.seg.list = append(l.seg.list, s)
		fi, err := file.f.Stat()
		if err != nil {
			return fmt.Errorf("wal: stat segment: %w", err)
		}
		s.size = fi.Size()
	}
	return nil
}

// load repairs the tail and reads the sealed segments' first headers (or,
// under Salvage, scans them all).
func (l *Log) load() error {
	if len(l.seg.list) == 0 {
		return nil
	}
	sealed := l.seg.list[:len(l.seg.list)-1]
	for _, s := range sealed {
		s.sealed = true
	}
	if err := l.repairTail(l.seg.list[len(l.seg.list)-1]); err != nil {
		return err
	}
	if err := l.trimSealed(sealed); err != nil {
		return err
	}
	if err := l.tornRoll(); err != nil {
		return err
	}
	sealed = l.seg.list[:len(l.seg.list)-1]
	if !l.opts.Salvage {
		if err := l.readFirstHeaders(sealed); err != nil {
			return err
		}
		return l.checkSealedEnds()
	}
	if err := l.salvageSealed(sealed); err != nil {
		return err
	}
	if err := l.boundTornEnd(); err != nil {
		return err
	}
	sort.SliceStable(l.report.Salvaged, func(i, j int) bool { // names sort by index
		a, b := l.report.Salvaged[i], l.report.Salvaged[j]
		return a.Segment < b.Segment || (a.Segment == b.Segment && a.Offset < b.Offset)
	})
	return nil
}

// repair runs the checks on the whole log (a tail without entries is one
// walq wrote, the log reaches MustReach) and then, unless read-only, cuts
// the torn tail and, after a salvaged loss or when the tail is full,
// starts the segment the log resumes in.
func (l *Log) repair() error {
	if n := len(l.seg.list); n > 0 && l.seg.list[n-1].entries == 0 {
		if err := l.checkTailName(l.seg.list[n-1]); err != nil {
			return err
		}
	}
	if err := l.checkReach(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return nil
	}
	if err := l.removeTornTail(); err != nil {
		return err
	}
	for _, cut := range []*tailCut{l.sealedCut, l.cut} {
		if cut == nil {
			continue
		}
		if err := cutFile(l.opts.FS, cut.path, cut.off); err != nil {
			return err
		}
	}
	if err := l.resumeAfterGap(); err != nil {
		return err
	}
	return l.rollFullTail()
}

// readFirstHeaders learns each sealed segment's first LSN from the header
// of its first entry (the rest is verified lazily, when first read) and
// checks that first LSNs grow at least half as fast as entry indexes.
func (l *Log) readFirstHeaders(sealed []*segment) error {
	r := &segReader{ahead: 64} // a header, not the segment
	for _, s := range sealed {
		r.reset(s.file.f)
		_, h, err := r.header(0, s.size)
		if err != nil && isFormatError(err) {
			return corruptAt(s.loc(0, 0), "first entry of a sealed segment: "+err.Error())
		}
		if err != nil {
			return fmt.Errorf("wal: read %s: %w", s.loc(0, 0), err)
		}
		s.firstLSN = h.first
	}
	return l.checkFirstLSNs()
}

// checkFirstLSNs checks that each segment starts at least one LSN per two
// entries after the previous one. An entry holds one record at least, but
// for a witness (witness.go), which holds none; two are never adjacent, so
// of k entries from a segment's first on, k/2 at least hold records (a
// segment may start with one: the witness of a roll's records).
func (l *Log) checkFirstLSNs() error {
	list := l.seg.list
	for i := 1; i < len(list); i++ {
		prev, s := list[i-1], list[i]
		if s.size == 0 || prev.firstLSN == 0 {
			continue
		}
		if s.firstLSN < prev.firstLSN+(s.firstIndex-prev.firstIndex)/2 {
			return corruptAt(s.loc(0, 0), fmt.Sprintf("%s: segment starts at LSN %d but %s starts at LSN %d with %d entries",
				errLSNOutOfLine, s.firstLSN, prev.path, prev.firstLSN, s.firstIndex-prev.firstIndex))
		}
	}
	return nil
}

// startCommitter opens the store (tidwall/wal) on the repaired directory,
// derives the next LSN and starts the committer goroutine.
func (l *Log) startCommitter(f faults) error {
	st, err := openStore(l.dir, l.opts)
	if err != nil {
		return err
	}
	c, err := l.newCommitter(st, f)
	if err != nil {
		_ = st.close()
		return err
	}
	l.c = c
	c.armWitness() // before the goroutine starts: c.mu is not needed yet
	go c.run()
	return nil
}

// newCommitter checks that the store sees the segments this package
// sees, and makes everything on disk durable (the directory, the tail and
// every sealed segment) so DurableLSN can start at WrittenLSN.
func (l *Log) newCommitter(st store, f faults) (*committer, error) {
	f.fill()
	if err := SyncDirFS(l.opts.FS, l.dir); err != nil { // tidwall/wal may have created segment 1
		return nil, err
	}
	if len(l.seg.list) == 0 {
		if err := l.adoptFirstSegment(); err != nil {
			return nil, err
		}
	}
	tail := l.seg.list[len(l.seg.list)-1]
	if err := l.checkStore(st, tail); err != nil {
		return nil, err
	}
	if err := tail.file.f.Datasync(); err != nil {
		return nil, fmt.Errorf("wal: fsync %s: %w", tail.path, err)
	}
	if err := l.syncSealed(); err != nil {
		return nil, err
	}
	if err := l.setLSNs(); err != nil {
		return nil, err
	}
	c := &committer{l: l, st: st, f: f, tail: tail, tailBytes: tail.size,
		nextIndex: tail.firstIndex + uint64(tail.entries), lastSync: time.Now(), timer: time.NewTimer(time.Hour),
		syncJobs: make(chan *syncJob), syncDone: make(chan *syncJob, 1), syncerExited: make(chan struct{})}
	c.timer.Stop()
	if ts, ok := st.(*tidwallStore); ok {
		ts.beforeReopen = c.cutBeforeReopen
	}
	c.late.timer = time.NewTimer(time.Hour)
	c.late.timer.Stop()
	c.witnessTimer = time.NewTimer(time.Hour)
	c.witnessTimer.Stop()
	named, err := l.openNamed(tail)
	if err != nil {
		return nil, err
	}
	c.named.Store(named) // a witness is due if Open's fsync made records durable that no entry names
	c.gathering.epoch = c.lastSync
	if l.opts.Sync != SyncAlways && f.writeback != nil {
		c.hints.jobs, c.hints.exited = make(chan hint, 1), make(chan struct{})
	}
	return c, nil
}

// adoptFirstSegment registers the segment tidwall/wal created in an empty
// directory.
func (l *Log) adoptFirstSegment() error {
	d, err := listDir(l.opts.FS, l.dir)
	if err != nil {
		return err
	}
	if len(d.segs) != 1 || d.segs[0].index != 1 {
		return fmt.Errorf("wal: tidwall/wal created %d segments in an empty directory, want one with index 1", len(d.segs))
	}
	file, err := openSegFile(l.opts.FS, d.segs[0].path)
	if err != nil {
		return err
	}
	l.seg.list = []*segment{{path: d.segs[0].path, firstIndex: 1, file: file, indexed: true}}
	return nil
}

// checkStore compares the store's first and last index with ours.
func (l *Log) checkStore(st store, tail *segment) error {
	first, err := st.firstIndex()
	if err != nil {
		return fmt.Errorf("wal: tidwall/wal: %w", err)
	}
	last, err := st.lastIndex()
	if err != nil {
		return fmt.Errorf("wal: tidwall/wal: %w", err)
	}
	wantLast := tail.firstIndex + uint64(tail.entries) - 1
	if first != l.seg.list[0].firstIndex || last != wantLast {
		return fmt.Errorf("%w: tidwall/wal sees entries %d-%d, segments hold %d-%d",
			ErrCorrupt, first, last, l.seg.list[0].firstIndex, wantLast)
	}
	return nil
}

// setLSNs derives the next LSN from the last segment holding records (or
// StartLSN) and initializes the LSN counters.
func (l *Log) setLSNs() error {
	next, err := l.endOfLog()
	if err != nil {
		return err
	}
	next = max(next, l.gap, l.resume)
	first := next
	if len(l.seg.list) > 0 {
		tail := l.seg.list[len(l.seg.list)-1]
		if tail.entries == 0 {
			tail.firstLSN, tail.endLSN = next, next
		}
		first = l.seg.list[0].firstLSN
	}
	l.mu.nextLSN = next
	l.firstLSN.Store(first)
	for _, a := range []*atomic.Uint64{&l.writtenLSN, &l.durableLSN} {
		a.Store(next - 1)
	}
	if t := l.report.Torn; t != nil && t.Entries > 0 && t.FirstLSN == 0 {
		t.FirstLSN = next // the torn entries were the first of the tail
		if l.tornNone {
			t.LastLSN = next - 1 // a witness, which holds no record
		}
	}
	return nil
}

// endOfLog returns the LSN after the last record, indexing the last
// sealed segment if the tail holds no records.
func (l *Log) endOfLog() (LSN, error) {
	for i := len(l.seg.list) - 1; i >= 0; i-- {
		s := l.seg.list[i]
		if err := l.ensureIndexed(s); err != nil {
			return 0, err
		}
		if s.entries > 0 {
			return s.endLSN, nil
		}
	}
	return l.opts.StartLSN, nil
}

// releaseAll drops the list's references on the segment files and
// releases the directory lock.
func (l *Log) releaseAll() {
	l.seg.Lock()
	for _, s := range l.seg.list {
		s.drop()
	}
	l.seg.list = nil
	l.seg.Unlock()
	l.unlock()
}

func (l *Log) unlock() {
	if l.lock != nil {
		_ = l.lock.Release() // an unlock error leaves nothing to do: the close releases it
		l.lock = nil
	}
}

// Report returns what Open cut or skipped.
func (l *Log) Report() Report { return l.report.clone() }

// FirstLSN returns the LSN of the first record still in the log (for an
// empty log, the LSN the first record will get).
func (l *Log) FirstLSN() LSN { return l.firstLSN.Load() }

// LastLSN returns the LSN of the last record appended, written or not;
// FirstLSN-1 when the log is empty.
func (l *Log) LastLSN() LSN {
	l.mu.Lock() // read where Append counts, rather than stored on every Append
	defer l.mu.Unlock()
	return l.mu.nextLSN - 1
}

// WrittenLSN returns the LSN of the last record written to the segment
// files: readable, but not necessarily durable.
func (l *Log) WrittenLSN() LSN { return l.writtenLSN.Load() }

// DurableLSN returns the LSN of the last record covered by an fsync.
func (l *Log) DurableLSN() LSN { return l.durableLSN.Load() }

// Segments describes the segment files, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.seg.RLock()
	defer l.seg.RUnlock()
	out := make([]SegmentInfo, len(l.seg.list))
	for i, s := range l.seg.list {
		out[i] = s.info()
	}
	return out
}

// Size returns the bytes held by the segment files (for a read-only Log,
// not counting a torn tail).
func (l *Log) Size() int64 {
	l.seg.RLock()
	defer l.seg.RUnlock()
	var n int64
	for _, s := range l.seg.list {
		n += s.size
	}
	return n
}

// Flush writes and fsyncs every record appended so far, whatever the sync
// mode. It returns the sticky error if the Log is poisoned.
func (l *Log) Flush() error {
	l.mu.Lock()
	closed := l.mu.closed
	l.sealOpenLocked()
	l.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case l.opts.ReadOnly:
		return nil
	}
	return l.request(request{})
}

// Close flushes, stops the committer, closes tidwall/wal and the segment
// files, and returns the sticky error if the Log was poisoned. Readers
// still open keep their segment file open until their own Close. A second
// Close returns ErrClosed, once the Log's goroutines have returned: also
// one called while the first runs. Close has no time limit: it returns
// once the write or fsync under way has, so on a device whose fsync never
// returns (a hung disk, an unreachable network file system) it does not
// return either. Giving up sooner would report the records that fsync
// covers as neither durable nor failed, and would let the caller release
// the directory to another writer while a write may still land in it.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		<-l.exited // the first Close's shutdown may still be running
		return ErrClosed
	}
	l.mu.closed = true
	l.sealOpenLocked()
	l.mu.Unlock()
	l.closed.Store(true)
	var err error
	if l.c != nil {
		// A running truncation ends first: its failure poisons the Log,
		// and shutdown returns the poison.
		l.truncating.Lock()
		close(l.stop)
		<-l.exited
		l.truncating.Unlock()
		err = l.c.closeErr
	}
	l.releaseAll()
	return err
}

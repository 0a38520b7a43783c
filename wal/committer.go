package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// faults replaces the committer's disk operations in white-box tests.
// Production uses the store's and the File's methods.
type faults struct {
	writeBatch func(st store, b *storeBatch) error
	datasync   func(f File) error // every fsync of a segment file the committer and the syncer make
	// writeback is every write-back hint (writeback.go); nil, once
	// filled, on a platform without hints.
	writeback func(f File, off, n int64) (supported bool, err error)
	// flush is every flush of a tail (writeback.go), made on a platform
	// with hints.
	flush func(fsys FS, path string) error
}

func (f *faults) fill() {
	if f.writeBatch == nil {
		f.writeBatch = store.writeBatch
	}
	if f.datasync == nil {
		f.datasync = File.Datasync
	}
	if f.writeback == nil && writebackHints { // none: no write-back goroutine
		f.writeback = startWriteback
	}
	if f.flush == nil {
		f.flush = flushSegment
	}
}

// request is a Flush or TruncateFront handed to the committer.
type request struct {
	truncate bool       // TruncateFront(lsn) rather than Flush
	lsn      LSN        // TruncateFront's argument
	cut      *frontCut  // TruncateFront's: what is left for its caller to do
	done     chan error // capacity 1; receives the outcome
}

// committer owns the store (tidwall/wal). It writes commit groups, fsyncs,
// rolls and truncates segments. Its goroutine serves timers, fsync
// completions, requests and wake-ups; a caller blocked in Commit.Wait or
// WaitWritten writes the gathered groups itself (see writeFor), which
// saves two goroutine hand-offs per call. Both hold mu while they touch
// the committer's fields; it shares state with the rest of the Log only
// through Log.mu (groups, sticky error), Log.seg (segment list) and the
// LSN atomics.
type committer struct {
	mu sync.Mutex // guards every field below, and the calls on st

	l  *Log
	st store
	f  faults

	lead lead // which waiting caller writes (writeFor); taken before mu, never under it

	batch      storeBatch // reused for every write
	batchBytes int        // bytes in batch (its buffer's capacity is at least the largest so far)
	groups     []*group   // groups being written
	done       []*group   // groups written; takeGroups hands them back to Log.mu.free or .bare, or drops them; swaps storage with groups
	frames     []int64    // framed size of each group's entry

	nextIndex uint64   // tidwall/wal index the next entry will get
	tailBytes int64    // bytes in the tail segment, as tidwall/wal counts them
	tail      *segment // the tail segment (also the last of Log.seg.list)
	ext       extender // the zeros ahead of the tail's written end (extend.go)

	dirty          bool          // entries written since the last fsync
	hints          hints         // SyncNever, SyncInterval: write-back of the tail (writeback.go)
	waiting        []*Commit     // SyncAlways: written, waiting for the next fsync
	waitingRecords int           // records of the waiting commits
	gathering      gathering     // SyncAlways: holding an fsync back for the callers to come (gather.go)
	late           lateWakes     // AppendLate's wake-ups (late.go); its atomics are shared with appending callers
	inflight       *syncJob      // SyncAlways: the fsync the syncer is running; nil when idle
	spare          *syncJob      // the last job, synced, reused by the next one; nil when none
	syncing        atomic.Bool   // inflight != nil; read without mu by writeFor
	syncJobs       chan *syncJob // to the syncer; closed at shutdown (stopSyncer)
	syncDone       chan *syncJob // capacity 1: back from the syncer, or from a caller that ran the fsync itself
	syncerExited   chan struct{} // closed when the syncer returns
	lastSync       time.Time     // time of the last fsync
	timer          *time.Timer   // SyncInterval's deadline, or SyncAlways's gathering; armed when timerOn
	timerOn        bool
	named          atomic.Uint64 // the highest Synced LSN of an entry written, a witness's included (witness.go); stored under mu, loaded without it by the witness timer
	witnessTimer   *time.Timer   // fires when a witness may be due (witness.go); armed when witnessOn
	witnessOn      atomic.Bool   // set by whoever arms witnessTimer, cleared when it fires; without mu
	witnessFrom    atomic.Uint64 // WrittenLSN when witnessTimer was armed: records written since show a busy log
	witnessWait    time.Duration // the witness timer's next delay while the log stays busy; the committer goroutine's

	stopped  bool  // shutdown ran: st is closed
	closeErr error // Close's result; read by Close after exited is closed
}

func (c *committer) run() {
	defer close(c.l.exited)
	go c.syncer(c.syncJobs, c.syncDone, c.syncerExited)
	if c.hints.jobs != nil {
		go c.hinter(c.hints.jobs, c.hints.exited)
	}
	for {
		// The timer's channel is always watched: a caller may arm it
		// while this loop waits. A stale tick (timerOn false) is ignored.
		select {
		case <-c.l.wake:
			c.mu.Lock()
			if !c.late.armed.Load() { // else judged when the timer fires
				c.late.judge(c.l.writtenLSN.Load())
			}
			if c.inflight == nil || c.l.urgent() {
				c.commit()
				c.startSync(false)
			}
			c.mu.Unlock()
		case <-c.late.timer.C:
			c.late.armed.Store(false) // before commit takes the groups: see AppendLate
			c.mu.Lock()
			c.late.judge(c.l.writtenLSN.Load())
			if c.inflight == nil || c.l.urgent() {
				c.commit()
				c.startSync(false)
			}
			c.mu.Unlock()
		case <-c.timer.C:
			c.mu.Lock()
			c.tick()
			c.mu.Unlock()
		case <-c.witnessTimer.C:
			c.witnessDue()
		case job := <-c.syncDone:
			c.mu.Lock()
			c.synced(job)
			c.commit() // what gathered during the fsync
			c.startSync(false)
			c.mu.Unlock()
		case req := <-c.l.reqs:
			c.mu.Lock()
			c.commit()
			c.drainSyncs()
			err := c.serve(req)
			c.commit() // what gathered during the drain: its callers saw an fsync in flight
			c.startSync(false)
			c.mu.Unlock()
			req.done <- err
		case <-c.l.stop:
			c.mu.Lock()
			c.commit()
			c.drainSyncs()
			c.shutdown()
			c.mu.Unlock()
			return
		}
	}
}

// tick handles the timer: a gathering's time is up (SyncAlways), or the
// SyncInterval deadline passed.
func (c *committer) tick() {
	if !c.timerOn {
		return
	}
	c.timerOn = false
	if c.l.opts.Sync == SyncAlways {
		c.commit() // the groups whose callers left them to the gathering (held)
		c.startSync(false)
		return
	}
	// An fsync made on a write once the interval had passed (afterWrite)
	// covers what this deadline was armed for: the writes since wait for
	// the interval to pass from that fsync, not for a second one now.
	if since := time.Since(c.lastSync); c.dirty && since < c.l.opts.SyncInterval {
		c.timer.Reset(c.l.opts.SyncInterval - since)
		c.timerOn = true
		return
	}
	if c.syncIfDirty() == nil { // a failure poisons the Log
		_ = c.witness()
	}
}

// writeFor writes the gathered groups on behalf of a caller waiting for
// cm, unless cm is already written, the committer has stopped, or cm only
// waits for an fsync that is in flight or held back for other callers
// (its group gathers for the next one, see gather.go; urgent groups are
// written at once). One caller at a time writes
// (see lead.go): a caller that finds another one writing waits for that
// write and leads the next one if its group was not in it. If an fsync
// is due, the leader runs it too, outside mu so that others keep writing,
// and posts it to syncDone for the committer goroutine, which writes what
// gathered meanwhile and starts the next one: a lone caller makes no
// hand-off.
func (c *committer) writeFor(cm *Commit) {
	for {
		// Without the mutex first: with hundreds of callers, taking it only
		// to learn that an fsync is in flight makes them a convoy. A stale
		// read is harmless: the committer writes what gathered once that
		// fsync ends.
		if cm.isWritten() {
			c.endHold()
			return
		}
		if !cm.urgent.Load() && (c.syncing.Load() || c.gathering.held()) {
			return
		}
		turn, yield := c.lead.take(c.l.opts.Sync != SyncAlways)
		if turn == nil {
			c.leadWrite(cm, yield)
			return
		}
		c.follow(cm, turn)
	}
}

// follow waits for the end of the leader's turn, or for cm to be
// written. A write is short (no fsync is made under the lead), so the
// follower first lets the goroutines ready to run go first, up to
// followYields times, and blocks on turn only if the leader is still not
// done: blocking costs the follower a park, and the leader a wake-up of
// each follower (often of an idle processor's thread) at the end of its
// turn, more than the write itself. The goroutines run meanwhile append
// what the next leader writes with this follower's group, if the leader
// did not take it. A stale look is harmless: writeFor looks again.
func (c *committer) follow(cm *Commit, turn <-chan struct{}) {
	for range followYields {
		runtime.Gosched()
		if cm.isWritten() {
			return
		}
		select {
		case <-turn:
			return
		default:
		}
	}
	<-turn // the leader marks what it wrote before it is done
}

// followYields is how many times a follower yields before it blocks.
const followYields = 2

// leadWrite is writeFor for the leader; it first lets the goroutines
// ready to run go first if yield is set (see lead.go).
func (c *committer) leadWrite(cm *Commit, yield bool) {
	if yield {
		runtime.Gosched()
	}
	c.mu.Lock()
	if c.stopped || cm.isWritten() || (c.inflight != nil && !cm.urgent.Load()) {
		c.mu.Unlock()
		c.lead.release(yield)
		return
	}
	c.commit()
	job := c.nextSync(false)
	c.mu.Unlock()
	c.lead.release(yield)
	if job != nil {
		c.runSync(job)
		c.syncedOwn(job)
	}
}

// syncedOwn hands back an fsync a caller ran itself. If the mutex is free
// it takes the job back at once, writes what gathered and starts the next
// fsync, as the committer goroutine would: a lone caller's next record
// then finds no fsync in flight and writes itself, instead of waiting for
// the committer goroutine to wake and for the syncer. Otherwise (the
// committer goroutine holds mu, perhaps draining the syncs and waiting for
// this very job) it posts the job to syncDone.
func (c *committer) syncedOwn(job *syncJob) {
	if !c.mu.TryLock() {
		c.syncDone <- job // capacity 1, and one job at a time: never blocks
		return
	}
	c.synced(job)
	c.commit() // what gathered during the fsync
	c.startSync(false)
	c.mu.Unlock()
}

func (c *committer) serve(req request) error {
	if req.truncate {
		return c.truncateFront(req.lsn, req.cut)
	}
	if err := c.syncIfDirty(); err != nil {
		return err
	}
	return c.witness()
}

// commit writes every waiting group as one batch and completes their
// Commits according to the sync mode; the caller then starts the fsync
// (startSync or nextSync) under SyncAlways.
func (c *committer) commit() {
	var err error
	c.groups, err = c.l.takeGroups(c.groups[:0], c.done)
	for i := range c.done { // a store each: a clear is a call, with a bulk write barrier
		c.done[i] = nil
	}
	c.done = c.done[:0]
	if len(c.groups) == 0 {
		return
	}
	if err == nil {
		err = c.poisonedMeanwhile()
	}
	if err == nil {
		err = c.write()
	}
	if err == nil {
		for _, g := range c.groups {
			g.commit.markWritten(nil)
		}
		err = c.afterWrite()
	}
	if err == nil && c.hintDue() {
		c.writeback() // once every writebackBytes, and once at flushAt: the test stays here
	}
	if err == nil {
		err = c.poisonedMeanwhile()
	}
	if err != nil {
		err = c.l.poison(err)
		c.failWaiting(err)
	}
	for _, g := range c.groups {
		if err == nil && c.l.opts.Sync == SyncAlways && g.sync {
			c.queueSync(g.commit, int(g.count))
			continue
		}
		g.commit.finish(err)
	}
	// The groups written wait in done for the next takeGroups; the
	// slices swap, as done is empty: no copy.
	c.groups, c.done = c.done, c.groups
	if c.batchBytes > maxFreeBuf {
		c.batch = storeBatch{} // do not pin the memory of a large batch
	}
}

// poisonedMeanwhile returns the sticky error when an fsync failed on
// another goroutine (the syncer, or a caller running one) since
// takeGroups read it: the groups taken are not written then, and those
// written already are not finished with nil, so that no Wait after the
// failure returns nil.
func (c *committer) poisonedMeanwhile() error {
	if !c.l.poisoned.Load() {
		return nil
	}
	return c.l.Err()
}

// write writes the groups, then publishes the new entries to readers. A
// batch that rolls the segment is written in parts, one WriteBatch each
// (writeParts): the groups up to the one that seals a segment, then, once
// that segment and the directory are fsynced (syncRolled), the rest into
// the new tail. So nothing reaches a new segment before the one sealed
// before it is durable, and a power loss cannot keep the new tail's
// entries and lose the sealed segment's end, whatever tidwall/wal fsyncs
// at its roll.
//
// Each entry carries the Synced LSN (entry.go): DurableLSN, read here,
// before the write is issued. It is a true claim about the disk because
// DurableLSN is only ever raised after the fsync that covers it returned:
// by runSync after its datasync returned, by sync after its datasync
// returned, by publish after syncRolled fsynced the sealed segments, and
// at Open (setLSNs) after newCommitter fsynced the tail and every sealed
// segment had been fsynced when it was sealed. So when the load below
// returns d, an fsync covering every record up to d has completed, and the
// write of the batch, issued after the load, begins after it. A raise
// that races with the load is merely not seen: the claim is then lower
// than it could be, never higher.
func (c *committer) write() error {
	c.frames, c.batchBytes = c.frames[:0], 0
	synced := c.l.durableLSN.Load()
	if synced > c.named.Load() {
		c.named.Store(synced)
	}
	for _, g := range c.groups {
		h := g.header()
		h.synced = synced
		sealEntry(g.buf, h)
		c.frames = append(c.frames, frameSize(len(g.buf)))
		c.batchBytes += len(g.buf)
	}
	plan := planRolls(c.tailBytes, c.l.opts.SegmentSize, c.frames)
	if c.crossesZeros(plan) {
		if err := c.awaitZeros(); err != nil {
			return err
		}
	}
	segs, err := c.writeParts(plan)
	if err != nil {
		return err
	}
	c.publish(plan, segs)
	return nil
}

// writeParts writes the groups as plan says, one WriteBatch for each
// segment they reach, and returns the segments the rolls opened. After
// each part that ends in a roll, and before the next part, it adopts the
// rolls that part made (adoptRolls): the segments they sealed are
// fsynced, then the directory. A part can make two rolls: tidwall/wal
// seals a tail already past the segment size before it writes the first
// entry of a batch. Only Open leaves such a tail (a write seals the
// segment it takes to the segment size), and newCommitter fsynced it, so
// it is durable before that part reaches the new segment, whose name
// createPreRolled makes durable before the part is written.
func (c *committer) writeParts(plan rollPlan) ([]*segment, error) {
	if len(plan.starts) > 0 && plan.starts[0] == 0 {
		if err := c.createPreRolled(); err != nil {
			return nil, err
		}
	}
	var segs []*segment
	prev, from, j := c.tail, 0, 0 // the segment the next part starts in; its first group; the next roll to adopt
	for from < len(c.groups) || j < len(plan.starts) {
		k := j // the rolls this part makes: j up to k, k excluded
		for k < len(plan.starts) && plan.starts[k] <= from {
			k++
		}
		to := len(c.groups)
		if k < len(plan.starts) {
			to, k = plan.starts[k], k+1
		}
		if err := c.writePart(from, to); err != nil {
			return nil, releaseSegments(segs, err)
		}
		rolled, err := c.adoptRolls(prev, plan, j, k)
		if err != nil {
			return nil, releaseSegments(segs, err)
		}
		segs = append(segs, rolled...)
		if len(rolled) > 0 {
			prev = rolled[len(rolled)-1]
		}
		from, j = to, k
	}
	return segs, nil
}

// writePart writes groups from up to to, excluded, with one WriteBatch.
func (c *committer) writePart(from, to int) error {
	c.batch.clear()
	for i := from; i < to; i++ {
		c.batch.add(c.nextIndex+uint64(i), c.groups[i].buf)
	}
	if err := c.f.writeBatch(c.st, &c.batch); err != nil {
		first, last := c.groups[from], c.groups[to-1]
		return fmt.Errorf("wal: write of LSNs %d-%d failed, log poisoned: %w",
			first.first, last.header().end()-1, err)
	}
	return nil
}

// adoptRolls checks the files that rolls j up to k (excluded) of plan
// rolled over to and opens them; prev is the segment the first of them
// sealed. Each sealed segment is fsynced through the Log's FS (tidwall/wal's
// own fsync is not counted on: tidwall.go), then the directory, which
// tidwall/wal does not fsync, and the store's cache is dropped so the
// sealed segment does not stay in memory.
func (c *committer) adoptRolls(prev *segment, plan rollPlan, j, k int) ([]*segment, error) {
	if j == k {
		return nil, nil
	}
	segs := make([]*segment, 0, k-j)
	sealed := prev
	for r := j; r < k; r++ {
		s, err := c.openRolled(sealed, plan.sealed[r], plan.starts[r])
		if err != nil {
			return nil, releaseSegments(segs, err)
		}
		segs = append(segs, s)
		sealed = s
	}
	if err := c.syncRolled(prev, segs); err != nil {
		return nil, releaseSegments(segs, err)
	}
	c.unpublishTail() // dropCache hands its storage to the next tail
	if err := c.st.dropCache(); err != nil {
		return nil, releaseSegments(segs, fmt.Errorf("wal: segment roll: %w", err))
	}
	return segs, nil
}

// releaseSegments releases the files of segments a failed roll opened
// (the log, poisoned by err, never adopts them) and returns err, joined
// with any failure to release.
func releaseSegments(segs []*segment, err error) error {
	for _, s := range segs {
		if rerr := s.file.release(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("wal: release %s: %w", s.path, rerr))
		}
	}
	return err
}

// openRolled checks that prev was sealed at the predicted size and opens
// the segment whose first entry is batch entry k.
func (c *committer) openRolled(prev *segment, size int64, k int) (*segment, error) {
	fi, err := prev.file.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: segment roll: %w", err)
	}
	if fi.Size() > size && prev == c.tail && c.ext.path == prev.path {
		if _, err := c.cutZeros(size); err != nil { // fsynced by syncRolled, before the directory
			return nil, err
		}
		if err := c.releaseExtender(); err != nil {
			return nil, err
		}
		if fi, err = prev.file.f.Stat(); err != nil {
			return nil, fmt.Errorf("wal: segment roll: %w", err)
		}
	}
	if fi.Size() != size {
		return nil, fmt.Errorf("wal: segment roll mispredicted: %s holds %d bytes, expected %d; log poisoned",
			prev.path, fi.Size(), size)
	}
	index := c.nextIndex + uint64(k)
	path := filepath.Join(c.l.dir, segmentName(index))
	file, err := openSegFile(c.l.opts.FS, path)
	if err != nil {
		return nil, fmt.Errorf("wal: segment roll mispredicted: %w; log poisoned", err)
	}
	first := c.groups[len(c.groups)-1].header().end()
	if k < len(c.groups) {
		first = c.groups[k].first
	}
	return &segment{path: path, firstIndex: index, file: file, firstLSN: first, indexed: true}, nil
}

// unpublishTail stops readers from copying the tail's bytes from the
// store's copy in memory (segment.mem), before the store reuses its
// storage; they read the file until the next publish.
func (c *committer) unpublishTail() {
	c.l.seg.Lock()
	c.tail.mem = nil
	c.l.seg.Unlock()
}

// publish makes the written entries visible to readers: it places each
// entry in its segment, seals rolled segments and appends the new ones.
func (c *committer) publish(plan rollPlan, segs []*segment) {
	l := c.l
	l.seg.Lock()
	s, j := c.tail, 0
	for i, g := range c.groups {
		for ; j < len(plan.starts) && plan.starts[j] == i; j++ {
			s = c.seal(s, segs[j])
		}
		s.addEntry(g.header(), plan.offs[i], c.frames[i])
	}
	for ; j < len(plan.starts); j++ {
		s = c.seal(s, segs[j])
	}
	s.mem = nil
	if b := c.st.tailBytes(); int64(len(b)) == plan.tail && plan.tail == s.size {
		s.mem = b[:len(b):len(b)]
	}
	l.writtenLSN.Store(c.groups[len(c.groups)-1].header().end() - 1)
	l.seg.Unlock()
	if len(segs) > 0 { // syncRolled fsynced every segment sealed
		l.advanceDurable(s.firstLSN - 1)
	}
	if len(segs) > 0 {
		c.hints.bytes, c.hints.flushed = 0, false // a new tail is hinted and flushed from its start
	}
	c.tail, c.tailBytes = s, plan.tail
	c.nextIndex += uint64(len(c.groups))
}

// seal marks s sealed and appends next to the list; the caller holds
// Log.seg.
func (c *committer) seal(s, next *segment) *segment {
	s.sealed, s.mem = true, nil
	// Its index is dropped: a backlog of sealed segments read in order
	// needs none, and the first lookup that does rebuilds it. Under
	// Salvage it is kept: it may hold the resync targets past damage.
	if !c.l.opts.Salvage {
		s.points, s.indexed = nil, false
	}
	c.l.seg.list = append(c.l.seg.list, next)
	return next
}

// afterWrite fsyncs as the sync mode asks.
func (c *committer) afterWrite() error {
	c.dirty = true
	switch c.l.opts.Sync {
	case SyncAlways:
		return nil // the syncer's job: see queueSync
	case SyncInterval:
		since := time.Since(c.lastSync)
		if since >= c.l.opts.SyncInterval {
			if err := c.sync(); err != nil {
				return err
			}
			c.armWitness()
			return nil
		}
		if !c.timerOn {
			c.timer.Reset(c.l.opts.SyncInterval - since)
			c.timerOn = true
		}
	}
	return nil
}

// sync fsyncs the tail segment; every other segment was fsynced when sealed.
func (c *committer) sync() error {
	if err := c.f.datasync(c.tail.file.f); err != nil {
		return fmt.Errorf("wal: fsync of %s failed, log poisoned: %w", c.tail.path, err)
	}
	if err := c.awaitFlush(); err != nil {
		return err
	}
	c.dirty, c.lastSync = false, time.Now()
	c.l.advanceDurable(c.l.writtenLSN.Load())
	return nil
}

// syncIfDirty fsyncs if anything was written since the last fsync; it
// returns the sticky error if the Log is poisoned.
func (c *committer) syncIfDirty() error {
	if err := c.l.Err(); err != nil || !c.dirty {
		return err
	}
	if err := c.sync(); err != nil {
		return c.l.poison(err)
	}
	return nil
}

// shutdown makes everything durable and closes the store.
func (c *committer) shutdown() {
	c.stopped = true
	c.timer.Stop()
	c.witnessTimer.Stop()
	c.late.timer.Stop()
	c.stopHinter()
	c.stopSyncer()
	err := c.l.Err()
	if err == nil {
		err = c.cutTail()
	}
	if err == nil {
		err = c.syncIfDirty()
	}
	if rerr := c.releaseExtender(); err == nil && rerr != nil {
		err = rerr
	}
	if cerr := c.st.close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: close: %w", cerr)
	}
	c.closeErr = err
}

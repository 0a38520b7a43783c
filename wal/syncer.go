package wal

import (
	"fmt"
	"time"
)

// Under SyncAlways the committer does not fsync inline: it hands the fsync
// to the syncer goroutine. While the fsync runs, groups that only wait for
// durability gather (they need the next fsync anyway, and one large write
// costs less than many small ones); a group with a WaitWritten caller is
// written at once, so that a reader such as a dequeue does not wait for an
// fsync it does not need. One fsync covers every group written before it
// started; as soon as it ends, the gathered groups are written and the
// next fsync starts.
//
// The syncer fsyncs the tail segment through this package's own handle,
// not through tidwall/wal, whose Sync holds the lock its writes need.
// Segments sealed meanwhile were fsynced by the committer at roll-over
// (syncRolled).

// syncJob is one fsync and the commits it makes durable.
type syncJob struct {
	records  int           // records the fsync makes durable
	took     time.Duration // how long the fsync took, set by the syncer
	end      time.Time     // when it ended, set by the syncer
	sleepers int32         // callers blocked in Wait when it ended, set by the syncer
	upTo     LSN           // every record up to here was written before the fsync
	file     *segFile      // the tail segment, pinned for the fsync
	zeros    *zeroWrite    // written into the tail before the fsync, so that it covers them; nil when none
	path     string        // its path, for errors
	commits  []*Commit     // completed by the fsync
	spare    []*Commit     // once synced: the emptied commits slice, for the next waiting list
	err      error         // the fsync's outcome, set by the syncer
}

// syncer runs fsync jobs until jobs is closed, then closes exited. It
// completes the job's commits itself, so that a waiter wakes one hand-off
// sooner, then hands the job back to the committer.
func (c *committer) syncer(jobs <-chan *syncJob, done chan<- *syncJob, exited chan<- struct{}) {
	defer close(exited)
	for job := range jobs {
		c.runSync(job)
		done <- job
	}
}

// stopSyncer stops the syncer and waits for it to return, so that Close
// returns only once every goroutine of the Log has. shutdown calls it after
// drainSyncs, under mu: no job is in flight, so the syncer waits for the
// next one and has nothing to hand back. Should a job come back all the
// same, it is taken back here rather than left to block the syncer's
// send, which would keep Close waiting for ever.
func (c *committer) stopSyncer() {
	close(c.syncJobs)
	for {
		select {
		case job := <-c.syncDone:
			c.synced(job)
		case <-c.syncerExited:
			return
		}
	}
}

// runSync fsyncs the job's segment and completes its commits.
func (c *committer) runSync(job *syncJob) {
	if c.l.opts.plant == bugEarlyDurable {
		c.l.advanceDurable(job.upTo)
		for _, cm := range job.commits {
			cm.finish(nil)
		}
		job.commits = nil
	}
	var err error
	if job.zeros != nil {
		err = job.zeros.write()
	}
	start := time.Now()
	if err == nil {
		err = c.f.datasync(job.file.f)
	}
	job.end = time.Now()
	job.took = job.end.Sub(start)
	job.sleepers = c.gathering.sleepers.Load() // before the fsync wakes any
	c.l.metrics.observeSync(job.took, job.records)
	_ = job.file.release() // read-only handle: a close error loses nothing
	// An fsync that succeeds after the log was poisoned meanwhile (a
	// write of a later group failed) fails its commits all the same,
	// although their records are durable: every commit not complete at
	// the poisoning fails with its error, so that a Flush or a Pending
	// never reports success after the log refused a write. The callers
	// are told "failed" for records that a restart reads back (at least
	// once): Commit.Wait and queue.Pending.Err say so.
	if err != nil && job.zeros != nil && job.zeros.err != nil {
		err = c.l.poison(err)
	} else if err != nil {
		err = c.l.poison(fmt.Errorf("wal: fsync of %s failed, log poisoned: %w", job.path, err))
	} else if err = c.l.Err(); err == nil {
		c.l.advanceDurable(job.upTo)
	}
	job.err = err
	for _, cm := range job.commits {
		cm.finish(err)
	}
}

// queueSync records a commit of n records that waits for an fsync; the
// caller then calls startSync.
func (c *committer) queueSync(cm *Commit, n int) {
	c.waiting = append(c.waiting, cm)
	c.waitingRecords += n
	c.dirty = true
}

// startSync hands the waiting commits to the syncer if it is idle. Unless
// forced, it first lets the fsync wait for the callers the last one
// released (gather.go).
func (c *committer) startSync(force bool) {
	if job := c.nextSync(force); job != nil {
		c.syncJobs <- job
	}
}

// nextSync returns the fsync job to run now, marked in flight, or nil
// (idle, already in flight, or gathering; see startSync).
func (c *committer) nextSync(force bool) *syncJob {
	if c.inflight != nil || len(c.waiting) == 0 {
		return nil
	}
	if !force && c.hold() {
		return nil
	}
	job := c.spare // one job in flight at a time: the last one is reused
	if job == nil {
		job = new(syncJob)
	}
	next := job.spare
	zeros, err := c.planZeros()
	if err != nil {
		c.l.poison(err) // the job's fsync runs, and fails its commits
	}
	c.l.seg.RLock()
	*job = syncJob{records: c.waitingRecords, upTo: c.l.writtenLSN.Load(), file: c.tail.file.pin(),
		path: c.tail.path, zeros: zeros, commits: c.waiting}
	c.l.seg.RUnlock()
	c.spare, c.waiting, c.waitingRecords = nil, next, 0
	c.gathering.holding.Store(false)
	c.inflight = job
	c.syncing.Store(true)
	return job
}

// synced takes back a completed fsync job; the caller starts the next one.
// The job and its commits' slice are kept for the next fsync.
func (c *committer) synced(job *syncJob) {
	c.inflight = nil
	c.syncing.Store(false)
	if job.zeros != nil && c.ext.pending == job.zeros {
		c.ext.pending = nil // written: runSync wrote them before the fsync
		c.landed(job.zeros)
	}
	err := job.err
	if err == nil {
		c.lastSync = job.end
		c.gathering.ended(job)
		c.dirty = c.l.writtenLSN.Load() > job.upTo
		c.armWitness()
	}
	clear(job.commits)
	*job = syncJob{spare: job.commits[:0]}
	c.spare = job
	if err != nil {
		c.failWaiting(err)
	}
}

// failWaiting fails the commits that wait for an fsync.
func (c *committer) failWaiting(err error) {
	for _, cm := range c.waiting {
		cm.finish(err)
	}
	c.waiting, c.waitingRecords = nil, 0
}

// drainSyncs waits until no commit waits for the syncer.
func (c *committer) drainSyncs() {
	for {
		c.startSync(true)
		if c.inflight == nil {
			return
		}
		c.synced(<-c.syncDone)
	}
}

// advanceDurable raises DurableLSN to lsn unless it is already higher. The
// committer (at a roll-over, after syncRolled) and the syncer
// both raise it, concurrently: a plain load-and-store could lower it.
func (l *Log) advanceDurable(lsn LSN) {
	for {
		cur := l.durableLSN.Load()
		if cur >= lsn || l.durableLSN.CompareAndSwap(cur, lsn) {
			return
		}
	}
}

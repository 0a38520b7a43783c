package wal

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Commit is the outcome of one commit group, shared by all its records.
// Only the committer (or a caller writing on its behalf, or the syncer)
// completes it.
//
// A caller that waits usually finds its group complete once it has
// written it itself (see writeFor), so the channels that Done and Written
// return are made on demand, when someone is about to block on one: a
// commit whose callers never block allocates none.
type Commit struct {
	l       *Log        // woken when a WaitWritten caller is waiting
	urgent  atomic.Bool // a caller waits for the write: do not hold it back for an fsync
	state   atomic.Uint32
	sleeps  atomic.Int32 // callers blocked in Wait for an fsync; -1 once done (see gather.go)
	durable bool         // done needs an fsync after the write (SyncAlways); immutable
	werr    error        // set before stateWritten
	err     error        // set before stateDone

	// The channels, made on demand (see channel and complete): nil until
	// someone is about to block; the package's closed channel once a
	// channel made was closed. An atomic.Value holds a chan struct{}
	// without an allocation of its own.
	written atomic.Value // chan struct{} closed once the group is written (or failed)
	done    atomic.Value // chan struct{} closed once the group is done
}

// The bits of Commit.state.
const (
	stateWritten uint32 = 1 << iota // the group is written, or failed: werr is set
	stateDone                       // Wait would return: err is set
)

// closed is a closed channel, returned for a Commit already complete.
var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func (c *Commit) init(l *Log) {
	c.l = l
	c.durable = l == nil || l.opts.Sync == SyncAlways // only SyncAlways waits for more than the write
}

// WaitWritten blocks until the group is written to its segment file, where
// readers see it and a crash of the process cannot lose it (a power loss
// still can before the fsync); it returns nil, or the error that poisoned
// the Log.
//
// Under SyncAlways the committer holds back the write of a group whose
// records only wait for durability while an fsync is in flight (they need
// the next fsync anyway, and one larger write costs less); a WaitWritten
// caller marks its group urgent, and it is written at once.
func (c *Commit) WaitWritten() error {
	if !c.isWritten() {
		c.urgent.Store(true)
		c.write()
		if !c.isWritten() { // usually it is: the caller wrote it
			<-c.channel(stateWritten)
		}
	}
	return c.werr
}

// write writes the group (with every other one gathered) from the caller's
// goroutine, unless it is written already.
func (c *Commit) write() {
	if c.l != nil && c.l.c != nil {
		c.l.c.writeFor(c)
	}
}

// isWritten reports whether the group is written (or failed).
func (c *Commit) isWritten() bool { return c.state.Load()&stateWritten != 0 }

// isDone reports whether Wait would return.
func (c *Commit) isDone() bool { return c.state.Load()&stateDone != 0 }

// channel returns the channel closed once the state bit is set, making it
// if nobody asked for it before. Without a lock, and without an atomic
// write when nobody asks (see complete): a channel installed here is
// closed by whichever of channel and complete sees the other's write
// first. Both write first (the CAS here, the state bit there), then look
// at what the other wrote; so at least one of them sees the other, and
// the one that swaps the channel for closed closes it.
func (c *Commit) channel(bit uint32) <-chan struct{} {
	v := c.signal(bit)
	for {
		if ch, ok := v.Load().(chan struct{}); ok {
			return ch
		}
		if c.state.Load()&bit != 0 {
			return closed
		}
		ch := make(chan struct{})
		if v.CompareAndSwap(nil, ch) {
			if c.state.Load()&bit != 0 {
				fire(v, ch)
			}
			return ch
		}
	}
}

// fire closes ch, the channel v held, unless someone else did.
func fire(v *atomic.Value, ch chan struct{}) {
	if ch != nil && ch != closed && v.CompareAndSwap(ch, closed) {
		close(ch)
	}
}

func (c *Commit) signal(bit uint32) *atomic.Value {
	if bit == stateWritten {
		return &c.written
	}
	return &c.done
}

// complete sets the state bits and closes the channels made for them (see
// channel). A channel is closed once: fire swaps it for closed first.
func (c *Commit) complete(bits uint32) {
	c.state.Or(bits)
	if bits&stateWritten != 0 && c.written.Load() != nil { // usually nobody made one
		fireMade(&c.written)
	}
	if bits&stateDone != 0 && c.done.Load() != nil {
		fireMade(&c.done)
	}
}

// fireMade closes the channel v holds, if one was made and not closed.
func fireMade(v *atomic.Value) {
	ch, _ := v.Load().(chan struct{})
	fire(v, ch)
}

// markWritten completes WaitWritten (and Wait, unless the group waits
// for an fsync: then it is done once written).
func (c *Commit) markWritten(err error) {
	if c.isWritten() {
		return
	}
	c.werr = err
	if c.durable {
		c.complete(stateWritten)
		return
	}
	c.err = err
	c.complete(stateWritten | stateDone)
}

// Wait blocks until the group is written and, under SyncAlways, fsynced;
// it returns nil, or the error that poisoned the Log. An error does not
// mean the group is absent: every commit not complete when the Log is
// poisoned fails, also one whose group was written before (a later write
// or an fsync failed) or even fsynced (its fsync ended after the
// poisoning), and a reopen may read such a group back.
func (c *Commit) Wait() error {
	if !c.isDone() {
		c.sleep()
		c.write()
		if !c.isDone() { // without fsync, usually it is: the caller wrote it
			<-c.channel(stateDone)
		}
	}
	return c.err
}

// Done returns a channel closed when Wait would return. It wakes the
// committer, in case the group was appended by AppendWaiting or
// AppendLate.
func (c *Commit) Done() <-chan struct{} {
	if c.l != nil && !c.isWritten() {
		c.l.wakeCommitter()
	}
	return c.channel(stateDone)
}

// Completed reports whether the group is done: Wait would return at
// once, with the group's outcome, and the channel of Done is closed or
// about to be (the completion sets the state before it closes the
// channel). Unlike Done it neither wakes the committer nor makes a
// channel, for a caller that looks without waiting: a group of
// AppendWaiting stays unwritten until a Wait, WaitWritten or Done on it,
// or a later write, takes it.
func (c *Commit) Completed() bool { return c.isDone() }

// finish completes the group with err: written, and done.
func (c *Commit) finish(err error) {
	if !c.durable {
		c.markWritten(err)
		return
	}
	c.markWritten(err)
	c.err = err
	c.wake()
	c.complete(stateDone)
}

// group is a commit group on its way to disk: the records of one entry.
type group struct {
	buf    []byte  // the entry: header room (filled by the committer) then the records
	first  LSN     // LSN of the first record
	count  uint32  // records in buf
	commit *Commit // shared by the group's records
	sync   bool    // a record was appended by Append, not AppendLazy: its Wait needs an fsync
}

// newCommitLocked returns the Commit of a new group: the only memory a
// group needs of its own, as the group itself and its buffer are reused
// (takeGroups). A Commit is never reused: its caller may hold it, and
// Wait on it, at any time. Commits are carved out of slabs of
// commitSlab, one allocation per slab rather than per group; a Commit
// held keeps its slab (commitSlab × about 100 bytes) alive. The caller
// holds Log.mu.
func (l *Log) newCommitLocked() *Commit {
	if len(l.mu.commits) == 0 {
		l.mu.commits = make([]Commit, commitSlab)
	}
	c := &l.mu.commits[0]
	l.mu.commits = l.mu.commits[1:]
	c.init(l)
	return c
}

// commitSlab is how many Commits newCommitLocked allocates at once.
const commitSlab = 16

func (g *group) header() entryHeader { return entryHeader{first: g.first, count: g.count} }

// The committer hands written groups back for reuse: at most maxFreeBufs
// of them with their buffers, of at most maxFreeBuf bytes (large groups
// are rare; keeping their buffers would pin memory), and up to
// maxFreeGroups more without (a commit under SyncAlways often writes a
// group per caller).
const (
	maxFreeBufs   = 4
	maxFreeGroups = 64
	maxFreeBuf    = 1 << 20
)

// Append adds a record to the log and returns its LSN and the Commit of
// its group. It only copies the record under a short mutex and wakes the
// committer, so it may be called while holding the caller's own lock; the
// order of Append calls is the order of LSNs. rec may be reused once
// Append returns.
func (l *Log) Append(rec []byte) (LSN, *Commit, error) {
	return l.append(rec, true)
}

// AppendLazy is Append for a record whose writer needs it written but not
// fsynced (it calls WaitWritten only): under SyncAlways the record starts
// no fsync of its own and becomes durable with the next one, which the
// next Append's Wait causes. The Wait of a group that holds only lazy
// records returns once it is written.
func (l *Log) AppendLazy(rec []byte) (LSN, *Commit, error) {
	return l.append(rec, false)
}

// AppendWaiting is Append (AppendLazy when lazy) for a caller that waits
// for the returned Commit itself (Wait, WaitWritten or Done), soon: the
// committer goroutine is not woken, since that call writes the group
// from the caller's goroutine, with every group gathered before it. Until
// then the record waits in memory, and is written with any later group.
func (l *Log) AppendWaiting(rec []byte, lazy bool) (LSN, *Commit, error) {
	return l.add(rec, !lazy)
}

// AppendAll adds recs to the log as one unit and returns the first one's
// LSN (the others follow it in order) and the Commit of their group. They
// all go into one group, which is one log entry under one CRC: a crash
// keeps every one of them or none, also when they are more than
// MaxGroupBytes (the entry is then as large as they are). wake is false
// for a caller that waits for the Commit itself, as with AppendWaiting.
func (l *Log) AppendAll(recs [][]byte, wake bool) (LSN, *Commit, error) {
	if l.opts.ReadOnly {
		return 0, nil, ErrReadOnly
	}
	if len(recs) == 0 || uint64(len(recs)) >= math.MaxUint32 {
		return 0, nil, fmt.Errorf("wal: AppendAll of %d records", len(recs))
	}
	l.mu.Lock()
	total := 0
	for _, rec := range recs {
		if err := l.appendErrLocked(len(rec)); err != nil {
			l.mu.Unlock()
			return 0, nil, err
		}
		total += recordSize(len(rec))
	}
	if g := l.mu.open; g != nil && g.count > 0 &&
		(len(g.buf)+total > l.opts.MaxGroupBytes || uint64(g.count)+uint64(len(recs)) >= math.MaxUint32) {
		l.sealOpenLocked()
	}
	first, c := l.putLocked(l.groupForLocked(0), true, recs...)
	l.mu.Unlock()
	if wake {
		l.wakeCommitter()
	}
	return first, c, nil
}

// AppendJoined adds one record made of parts, joined in order: as
// AppendWaiting (wake false) or Append (wake true), AppendLazy when lazy.
// Each part is copied into the open group as it is, so a caller whose
// record carries a large payload between a few bytes before and after it
// hands the payload over without joining the parts into a buffer of its
// own first (one copy of it fewer). The parts may be reused once it
// returns.
func (l *Log) AppendJoined(parts [][]byte, lazy, wake bool) (LSN, *Commit, error) {
	if l.opts.ReadOnly {
		return 0, nil, ErrReadOnly
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	l.mu.Lock()
	if err := l.appendErrLocked(n); err != nil {
		l.mu.Unlock()
		return 0, nil, err
	}
	g := l.groupForLocked(n)
	g.buf = appendJoinedRecord(g.buf, n, parts)
	lsn, c := l.placedLocked(g, !lazy, 1)
	l.mu.Unlock()
	if wake {
		l.wakeCommitter()
	}
	return lsn, c, nil
}

func (l *Log) append(rec []byte, sync bool) (LSN, *Commit, error) {
	lsn, c, err := l.add(rec, sync)
	if err == nil {
		l.wakeCommitter()
	}
	return lsn, c, err
}

// add copies rec into the open group.
func (l *Log) add(rec []byte, sync bool) (LSN, *Commit, error) {
	if l.opts.ReadOnly {
		return 0, nil, ErrReadOnly
	}
	l.mu.Lock()
	if err := l.appendErrLocked(len(rec)); err != nil {
		l.mu.Unlock()
		return 0, nil, err
	}
	lsn, c := l.putLocked(l.groupForLocked(len(rec)), sync, rec)
	l.mu.Unlock()
	return lsn, c, nil
}

// putLocked copies recs into g, the open group, gives them the next LSNs
// and returns the first and g's Commit; sync says whether they wait for
// an fsync. A group that reaches MaxGroupBytes or its most records is
// sealed. Once Log.mu is released g may be written and reused at any
// time: only its Commit is the caller's.
func (l *Log) putLocked(g *group, sync bool, recs ...[]byte) (LSN, *Commit) {
	for _, rec := range recs {
		g.buf = appendRecord(g.buf, rec)
	}
	return l.placedLocked(g, sync, len(recs))
}

// placedLocked gives the n records just copied into g, the open group,
// the next LSNs and returns the first and g's Commit, as putLocked says.
func (l *Log) placedLocked(g *group, sync bool, n int) (LSN, *Commit) {
	first := l.mu.nextLSN
	g.count += uint32(n)
	g.sync = g.sync || sync
	l.mu.nextLSN += LSN(n)
	if len(g.buf) >= l.opts.MaxGroupBytes || g.count == math.MaxUint32 {
		l.sealOpenLocked()
	}
	return first, g.commit
}

// appendErrLocked says why a record of n bytes cannot be appended.
func (l *Log) appendErrLocked(n int) error {
	switch {
	case l.mu.closed:
		return ErrClosed
	case l.mu.err != nil:
		return l.mu.err
	case n > l.opts.MaxRecordSize:
		return fmt.Errorf("%w: %d bytes, Options.MaxRecordSize is %d", ErrTooLarge, n, l.opts.MaxRecordSize)
	}
	return nil
}

// groupForLocked returns the open group, first sealing it if a record of
// n bytes would take it past MaxGroupBytes.
func (l *Log) groupForLocked(n int) *group {
	if g := l.mu.open; g != nil && g.count > 0 && len(g.buf)+recordSize(n) > l.opts.MaxGroupBytes {
		l.sealOpenLocked()
	}
	if l.mu.open == nil {
		g := l.freeGroupLocked()
		*g = group{buf: newEntry(g.buf), first: l.mu.nextLSN, commit: l.newCommitLocked()}
		l.mu.open = g
	}
	return l.mu.open
}

// freeGroupLocked returns a group written before, with its buffer if one
// is kept, or a new one.
func (l *Log) freeGroupLocked() *group {
	if g := pop(&l.mu.free); g != nil {
		return g
	}
	if g := pop(&l.mu.bare); g != nil {
		return g
	}
	return new(group)
}

// pop removes and returns the last group of list, or returns nil.
func pop(list *[]*group) *group {
	n := len(*list)
	if n == 0 {
		return nil
	}
	g := (*list)[n-1]
	(*list)[n-1] = nil
	*list = (*list)[:n-1]
	return g
}

// sealOpenLocked queues the open group for the committer.
func (l *Log) sealOpenLocked() {
	if g := l.mu.open; g != nil {
		l.mu.sealed = append(l.mu.sealed, g)
		l.mu.open = nil
	}
}

// wakeCommitter tells the committer that groups are waiting.
func (l *Log) wakeCommitter() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// urgent reports whether a queued group has a WaitWritten caller.
func (l *Log) urgent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.mu.open; g != nil && g.commit.urgent.Load() {
		return true
	}
	for _, g := range l.mu.sealed {
		if g.commit.urgent.Load() {
			return true
		}
	}
	return false
}

// takeGroups seals the open group and hands every queued group to the
// committer, with the sticky error (nil while healthy), under one hold of
// Log.mu; it takes back the groups already written (done), which nothing
// else refers to any more, for reuse.
func (l *Log) takeGroups(dst []*group, done []*group) ([]*group, error) {
	l.mu.Lock()
	for _, g := range done {
		l.recycleLocked(g)
	}
	if len(l.mu.sealed) == 0 { // the usual case: the open group alone
		if g := l.mu.open; g != nil {
			dst = append(dst, g)
			l.mu.open = nil
		}
	} else {
		l.sealOpenLocked()
		dst = append(dst, l.mu.sealed...)
		clear(l.mu.sealed)
		l.mu.sealed = l.mu.sealed[:0]
	}
	err := l.mu.err
	l.mu.Unlock()
	return dst, err
}

// recycleLocked keeps g, a group written, for reuse: with its buffer in
// free, or without in bare, or not at all when both are full. It drops
// g's Commit, which its callers may still hold.
func (l *Log) recycleLocked(g *group) {
	switch {
	case len(l.mu.free) < maxFreeBufs && cap(g.buf) <= maxFreeBuf:
		g.buf, g.commit = g.buf[:0], nil
		l.mu.free = append(l.mu.free, g)
	case len(l.mu.bare) < maxFreeGroups:
		g.buf, g.commit = nil, nil
		l.mu.bare = append(l.mu.bare, g)
	}
}

// poison makes err sticky and fails every group not yet handed to the
// committer. It returns the sticky error (the first one wins).
func (l *Log) poison(err error) error {
	l.mu.Lock()
	if l.mu.err == nil {
		l.mu.err = err
		l.poisoned.Store(true)
		close(l.poisonedC)
	}
	err = l.mu.err
	l.sealOpenLocked()
	pending := l.mu.sealed
	l.mu.sealed = nil
	l.mu.Unlock()
	for _, g := range pending {
		g.commit.finish(err)
	}
	return err
}

// Poisoned returns a channel that is closed when the Log is poisoned,
// whatever poisoned it (a failed write, fsync, roll or truncation, by a
// caller or in the background); Err then returns the error. It is the
// same channel for the Log's life, and never closed on a healthy Log (a
// Close does not close it).
func (l *Log) Poisoned() <-chan struct{} { return l.poisonedC }

// Err returns the error that poisoned the Log, or nil. While the Log is
// healthy it takes no lock.
func (l *Log) Err() error {
	if !l.poisoned.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

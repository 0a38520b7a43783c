package queue

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/walq/walq/index"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// The queue's side of the recovery procedure, which package recovery runs
// (recovery.Recover): how a snapshot body becomes a state, how the log is
// opened, and what ending a crashed process's leases and rewriting past
// damage append.

// decoder makes the queue's states for recovery: from a snapshot body, or
// empty.
type decoder struct{ o *Options }

func (d decoder) NewState() recovery.State { return newState(d.o) }

func (d decoder) DecodeState(body []byte) (recovery.State, error) {
	st, err := decodeState(body, d.o)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// loadSnapshot returns the state of the newest snapshot in dir and its
// LSN, or a new state when there is none.
func loadSnapshot(dir string, o *Options) (*state, uint64, error) {
	st, lsn, err := recovery.Load(o.FS, dir, decoder{o})
	if err != nil {
		return nil, 0, wrapCorrupt("load snapshot", err)
	}
	return st.(*state), lsn, nil
}

// recoverer is a queue being opened, as the target of recovery.Recover.
type recoverer struct {
	decoder
	q *Queue
	// loaded is the state Recover loaded before it opens the log (the
	// newest snapshot's, or a new one): what the log must keep for it.
	loaded recovery.State
}

func newRecoverer(q *Queue) *recoverer { return &recoverer{decoder: decoder{&q.opts}, q: q} }

// NewState is the decoder's, noted as the state loaded.
func (r *recoverer) NewState() recovery.State {
	r.loaded = r.decoder.NewState()
	return r.loaded
}

// DecodeState is the decoder's, noted as the state loaded.
func (r *recoverer) DecodeState(body []byte) (recovery.State, error) {
	st, err := r.decoder.DecodeState(body)
	if err == nil {
		r.loaded = st
	}
	return st, err
}

// OpenLog opens the queue's log, which becomes q.log.
func (r *recoverer) OpenLog(start, reach uint64) (*wal.Log, error) {
	dir := filepath.Join(r.q.dir, logDir)
	if err := r.checkFront(dir, start, reach); err != nil {
		return nil, err
	}
	log, err := wal.Open(dir, r.q.walOptions(start, reach))
	if err != nil {
		return nil, wrapCorrupt("open log", err)
	}
	r.q.log = log
	return log, nil
}

// checkFront refuses, before the log's Open finishes it, an interrupted
// truncation (a NAME.FRONT marker) that would remove records the state
// loaded needs (laterFront); a salvage refuses it too (salvageFront).
// A marker with no segment left before it removes nothing, but the log's
// Open removes the marker itself: when the log lacks records the state
// needs all the same (the truncation of a later moment done, the marker
// not yet removed), an open without Salvage is refused here, with the
// error it gives after the log's Open (recovery.Coverage), so that the
// refusal leaves the marker in place as every refusal leaves the
// directory. A salvage finishes such a marker, reporting the records
// already gone (Recovery.LostBefore). start and reach are OpenLog's.
func (r *recoverer) checkFront(dir string, start, reach uint64) error {
	o := r.q.opts
	switch {
	case r.loaded == nil:
		return nil
	case o.Salvage:
		return salvageFront(o.FS, r.q.dir, o.logSegmentSize(), r.decoder, r.loaded, start, reach)
	}
	switch marker, removes := frontMarker(o.FS, dir); {
	case marker == "": // a clean open reads the directory once here
		return nil
	case removes:
		return laterFront(o.FS, dir, o.logSegmentSize(), r.loaded, start, loadedFrom{lsn: start - 1})
	}
	return frontDone(o.FS, dir, o.logSegmentSize(), r.loaded, start)
}

// salvageFront is checkFront for a salvage, and for its read-only preview
// (replayReadOnly): it returns laterFront's error, as an open without
// Salvage does, for a marker in the log directory of the queue in dir
// whose truncation would remove records that the state the salvage
// replays needs. A salvage skips damaged entries; it destroys none that
// is intact, and finishing such a marker would remove intact segments for
// good, where moving it out keeps every one. st is the state loaded, whose
// records end at start-1; reach is the LSN the log must reach
// (recovery.Recover), past start-1 only when the salvage set a damaged
// newest snapshot aside: the marker is then compared with what the
// salvage falls back to, as Verify and Repair compare it (examineFront).
// The older snapshot is read as the salvage reads it, with d: when it
// cannot be read (an I/O error, not damage), that error is returned, since
// the marker cannot then be compared and the salvage fails on the same
// read once the log is open, after its Open finished the marker.
// A marker that removes nothing returns nil: the records it marks are
// gone already, and the salvage reports them (Recovery.LostBefore).
// fsys and segSize are laterFront's.
func salvageFront(fsys wal.FS, dir string, segSize int64, d recovery.Decoder, st recovery.State, start, reach uint64) error {
	logPath := filepath.Join(dir, logDir)
	if _, removes := frontMarker(fsys, logPath); !removes {
		return nil
	}
	from := loadedFrom{lsn: start - 1}
	if reach >= start { // a damaged newest snapshot set aside
		older, lsn, err := recovery.LoadOlder(fsys, dir, d, recovery.Info{LSN: reach})
		if err != nil {
			return fmt.Errorf("queue: salvage: load the snapshot to fall back to: %w", err)
		}
		st, start, from = older, lsn+1, loadedFrom{lsn: lsn, fallback: true}
	}
	return laterFront(fsys, logPath, segSize, st, start, from)
}

// frontDone returns the error an open gives for a log that lacks records
// st, loaded from the snapshot whose records end at start-1, needs
// (recovery.Coverage), for the log directory dir, which holds a
// NAME.FRONT marker with no segment left before it; nil when it holds
// them, and when the log cannot be read (the caller's own open reports
// that). fsys and segSize are laterFront's.
func frontDone(fsys wal.FS, dir string, segSize int64, st recovery.State, start uint64) error {
	l, err := wal.Open(dir, &wal.Options{ReadOnly: true, StartLSN: start, SegmentSize: segSize, FS: fsys})
	if err != nil {
		return nil // the caller's open reports it
	}
	defer l.Close() // read-only: nothing to lose
	if _, err := recovery.Coverage(l, st, start-1); err != nil {
		return wrapCorrupt("open", err)
	}
	return nil
}

// laterFront returns an error wrapping ErrCorrupt and ErrLaterFront,
// naming the marker and the way out, when the log directory dir holds a
// NAME.FRONT marker whose truncation would remove records that st needs:
// those after the snapshot whose records end at start-1 (start on) and
// those of its messages. from says what st was loaded from, for the
// error: the snapshot Open loads, or what a salvage falls back to beside
// a damaged newest snapshot. The queue truncates
// only below what the snapshot it has just written needs, so such a
// marker is from a later moment than st (a directory put back from
// copies made at different times, the newer snapshot not among them, or
// the newer one damaged); finishing it would remove the records the
// replay needs, and the open would then refuse the log as missing them,
// or a salvage lose them, with nothing left to restore: a salvage refuses
// it too (salvageFront). It returns nil
// when there is no marker, when no segment lies before it (the
// truncation removed them all already: finishing it removes nothing),
// when the marker removes nothing st needs, and when the log cannot be
// read (the caller's own open reports that). fsys is the file system
// (nil: the real one), segSize the writer's SegmentSize (0: unknown).
// Open (checkFront), a salvage and its preview (salvageFront), a
// read-only Open (laterFrontOr), Verify and Repair (examine) refuse the
// marker by it.
func laterFront(fsys wal.FS, dir string, segSize int64, st recovery.State, start uint64, from loadedFrom) error {
	marker, removes := frontMarker(fsys, dir)
	if !removes {
		return nil
	}
	// A read-only Log starts where the marker says, changing nothing. A
	// log it refuses as damaged is refused by the caller's open too, but
	// only after an Open finished the marker: a read-only salvage (a
	// preview, which changes nothing either) tells where the kept log
	// starts then.
	ro := &wal.Options{ReadOnly: true, StartLSN: start, SegmentSize: segSize, FS: fsys}
	l, err := wal.Open(dir, ro)
	if err != nil {
		ro.Salvage = true
		if l, err = wal.Open(dir, ro); err != nil {
			return nil // the caller's open reports it
		}
	}
	first := l.FirstLSN()
	l.Close() // read-only: nothing to lose
	// A log left empty starts at start (its FirstLSN), as an Open leaves
	// it: refused when the state needs records before start. A segment
	// walq's truncation keeps is empty on disk only when it starts after
	// the snapshot (its records were not synced yet), and the state's need
	// is start then.
	need := min(st.Need(), start)
	if first <= need {
		return nil
	}
	return ownWayOut{fmt.Sprintf("%v: open log: %s holds an interrupted truncation that would remove the log before LSN %d, "+
		"but %s needs the log from LSN %d: the marker is from a later moment than that "+
		"(a directory put back from copies made at different times?); finishing it would lose those records, so nothing was changed: "+
		"move %s out of the log directory to keep every segment, then %s",
		ErrCorrupt, dir, first, from.what(), need, marker, from.then()), ErrLaterFront}
}

// loadedFrom is what the state laterFront compares a marker with was
// loaded from, for its error.
type loadedFrom struct {
	lsn      uint64 // the snapshot's LSN; 0: none
	fallback bool   // a salvage's fall-back beside a damaged newest snapshot (recovery.LoadOlder)
}

// what names the state: the snapshot loaded, the older one a repair falls
// back to, or the log alone.
func (f loadedFrom) what() string {
	switch {
	case f.fallback && f.lsn == 0:
		return "a repair, rebuilding from the log alone (the newest snapshot is damaged and no older one is valid),"
	case f.fallback:
		return fmt.Sprintf("the older snapshot a repair falls back to (LSN %d; the newest is damaged)", f.lsn)
	case f.lsn == 0:
		return "the queue, which has no snapshot,"
	}
	return fmt.Sprintf("the snapshot loaded (LSN %d)", f.lsn)
}

// then is what to do once the marker is moved out of the log directory,
// and what a repair does with it in place.
func (f loadedFrom) then() string {
	if f.fallback {
		return "run 'walq repair DIR', which sets the damaged snapshot aside and keeps those records " +
			"(with the marker in place, a repair or a salvage refuses it: finishing the truncation would lose them)"
	}
	return "open again (or put back the snapshot taken with it; 'walq repair DIR' and a salvage refuse the marker too: " +
		"finishing the truncation would lose the records)"
}

// frontMarker returns wal.FrontMarker's marker and whether it removes a
// segment for the log directory dir; a directory it cannot read holds
// none here: the caller's open of the log reports that.
func frontMarker(fsys wal.FS, dir string) (string, bool) {
	marker, removes, err := wal.FrontMarker(fsys, dir)
	if err != nil {
		return "", false
	}
	return marker, removes
}

// Install makes st the queue's state and points the cursor's reader at
// its cursor. An open without a dedup window forgets here every acked id
// that the snapshot kept (its replay kept none), so that none refuses an
// enqueue and its snapshots omit them; its acks forget their ids at once.
// Its next snapshot is then written even if no record was appended since
// (a Compact right after Open), so that the forget is kept.
func (r *recoverer) Install(st recovery.State, snapLSN uint64) {
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.st = st.(*state)
	if !q.mu.st.dedupWindow {
		q.mu.forgot = q.mu.st.dedup.Expire(math.MaxInt64) > 0
	}
	q.mu.changed = make(chan struct{})
	q.mu.snapLSN = snapLSN
	q.resetCursorLocked()
}

// EndLeases ends every lease left by a crashed process: the message is
// ready again, or dead if it has had MaxDeliveries; a sorted queue's
// batch goes back.
func (r *recoverer) EndLeases() (ended, dead int, err error) {
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, end := range q.leaseEndsLocked() {
		if _, err := q.appendLocked(end.rec, nil); err != nil {
			return ended, dead, err
		}
		ended++
		if end.dead {
			dead++
		}
	}
	return ended, dead, nil
}

// leaseEnd is the record that ends a lease a crashed process left, and
// whether it dead-letters its message (a value of its batch).
type leaseEnd struct {
	rec  *record // an expire or dead record of a message, or a batch's return
	dead bool    // the message, or a value of the batch, goes to the dead set
}

// leaseEndsLocked returns the records that end every lease of the state,
// as EndLeases appends them and a read-only salvaging open counts them
// (showLeaseEnds). q.mu must be held.
func (q *Queue) leaseEndsLocked() []leaseEnd {
	var ends []leaseEnd
	for _, e := range leasedEntries(q.mu.st.table) {
		rec := q.endLease(e, "process crashed while the message was leased")
		ends = append(ends, leaseEnd{rec, rec.Op == opDead})
	}
	for _, b := range q.mu.st.sorted.Expired(math.MaxInt64, math.MaxInt) {
		rec := q.returnBatch(b, q.now(), crashedBatchReason)
		ends = append(ends, leaseEnd{rec, reachesLimit(b, rec.maxDeliveries())})
	}
	return ends
}

// crashedBatchReason is the reason of the return that ends a batch's
// lease a crashed process left (EndLeases).
const crashedBatchReason = "process crashed while the batch was leased"

// endsLeases reports whether the recovery of rep ends every lease, as
// recovery.Recover does: after a crash (no clean close) or any damage.
func endsLeases(rep Recovery) bool {
	return !rep.Clean || len(rep.Log.Salvaged) > 0 || rep.LostBefore != 0 || rep.SnapshotLost.Path != ""
}

// reachesLimit reports whether a value of the batch b goes to the dead set
// when b is returned under the delivery limit (0: none).
func reachesLimit(b index.Batch, limit uint32) bool {
	return limit > 0 && slices.ContainsFunc(b.Values, func(v index.SortedValue) bool { return v.Deliveries >= limit })
}

// CopyPast moves every live message out of the log before lsn, drops
// those whose records were lost (Recovery.Dropped), recounts the
// never-delivered messages and snapshots, so that the log before lsn goes.
func (r *recoverer) CopyPast(lsn uint64) (int, error) {
	q := r.q
	q.recovery.Dropped = q.lostBelow(lsn)
	moved, err := q.copyJumped()
	if err == nil {
		var n int
		n, err = q.movePinned(lsn, true)
		moved += n
	}
	if err == nil {
		q.forgetLostIDs(lsn)
		q.mu.Lock()
		q.mu.st.lost = salvageMarks{} // the cursor passed every mark and jump
		q.mu.Unlock()
		err = q.snapshot()
	}
	return moved, err
}

// copyJumped copies forward, as ready again, every message that the
// salvaging replay's cursor passed in a jump (salvageMarks) and that no
// record settled, and a dead-lettered one as dead: the damage took their
// lease records, and nothing says their consumers finished them. It
// returns how many it copied.
func (q *Queue) copyJumped() (int, error) {
	q.mu.Lock()
	jumps := slices.Clone(q.mu.st.lost.jumps)
	q.mu.Unlock()
	copied := 0
	for _, j := range jumps {
		for from := j.from; from < j.to; {
			cs, next, err := q.readCandidates(from, j.to)
			if err != nil {
				return copied, err
			}
			n, c, err := q.copyPassed(cs)
			copied += n
			if err == nil {
				err = waitWritten(c)
			}
			if err != nil {
				return copied, err
			}
			from = next
		}
	}
	return copied, nil
}

// copyPassed appends a cursor move of each candidate that a jump passed:
// not of one in the table (its delivery's lease survived) or marked
// acked. It returns the last commit.
func (q *Queue) copyPassed(cs []candidate) (int, *wal.Commit, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.mu.st
	n := 0
	var last *wal.Commit
	for _, c := range cs {
		if _, ok := st.table.Get(c.lsn); ok {
			continue
		}
		rec := &record{Op: opMove, Seq: c.lsn, Flags: flagCursor, ID: c.rec.ID, At: q.now(),
			Enq: c.rec.At, Size: uint32(c.size), Headers: c.rec.Headers, Payload: c.rec.Payload}
		if !st.lost.gone.copy(c.lsn, rec) {
			continue
		}
		cm, err := q.appendLocked(rec, nil)
		if err != nil {
			return n, nil, err
		}
		last = cm
		n++
	}
	return n, last, nil
}

// forgetLostIDs forgets, as a drop does, the producer-given ids of the
// messages before lsn that are gone. Once CopyPast has moved them, every
// live message before lsn is in the table; an id whose message is not
// was a never-delivered message whose enqueue record the damage took, and
// would otherwise refuse its producer's retry for good. The snapshot that
// follows keeps the change.
func (q *Queue) forgetLostIDs(lsn uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.mu.st
	var lost []index.DedupItem
	st.dedup.Snapshot().Ascend(func(it index.DedupItem) bool {
		if _, live := st.table.Get(it.Seq); it.AckedAt == 0 && it.Seq < lsn && !live {
			lost = append(lost, it)
		}
		return true
	})
	now := q.now()
	for _, it := range lost {
		st.dedup.Acked(it.ID, it.Seq, now, st.dedupWindow)
	}
}

// The state as recovery sees it (recovery.State).

// Apply decodes the record b, read at lsn, and applies it. b is valid
// only during the call (recovery.State).
//
// Outside a salvage the record's Payload, Sort and ID are read in place
// (decodeRecordAliasedID): a replay reads the record of every message in
// the log and keeps the payload of none of them, and the ID of only some,
// so a copy of each was most of what an open after a crash allocated.
// What the state keeps of them is copied first (ownKept). A salvaging
// replay, rare and slow anyway, decodes copies as before.
func (s *state) Apply(lsn uint64, b []byte) error {
	var r record
	if s.salvage {
		if err := decodeRecord(b, &r); err != nil {
			return err
		}
		return s.applySalvaging(lsn, &r, len(b))
	}
	id, err := decodeRecordAliasedID(b, &r)
	if err != nil {
		return err
	}
	ownKept(&r, id)
	return s.apply(lsn, &r, len(b))
}

// ownKept replaces the views of r, decoded by decodeRecordAliasedID, that
// applying it may keep with copies: the Sort of any record (a published
// value keeps it, a move or a dead-letter of a value names it), the
// Payload of a publish (the sorted queue's payload cache), and the ID
// (id, the view decodeRecordAliasedID returned) of every record but a
// plain enqueue (keepsID). Every other Payload (a message's, a batch
// settle's packed Seqs) is read during the apply and not kept; a plain
// enqueue's ID is not even read, and r.ID stays "".
func ownKept(r *record, id []byte) {
	r.Sort = bytes.Clone(r.Sort)
	if r.Op == opPublish {
		r.Payload = bytes.Clone(r.Payload)
	}
	if len(id) > 0 && keepsID(r) {
		r.ID = string(id)
	}
}

// applySalvaging is Apply in a salvaging replay. Besides the settles it
// keeps (settledAnyway), it notes the cursor's first move after records
// were lost (salvageMarks.jumps).
func (s *state) applySalvaging(lsn uint64, r *record, size int) error {
	if lsn > s.last+1 {
		s.lost.hole = true // the records between were lost
	}
	from := s.cursor
	s.narrowBatch(r)
	err := s.apply(lsn, r, size)
	if err != nil && s.settledAnyway(lsn, r) {
		err = nil
	}
	if s.lost.hole && s.cursor > from {
		to := s.cursor
		if r.Op == opLease || r.Op == opMove || r.Op == opMoveDead {
			to = r.Seq // the message that moved the cursor is in the table
		}
		s.lost.jumps = append(s.lost.jumps, lsnRange{from, to})
		s.lost.hole = false
	}
	return err
}

// salvageMarks is what a salvaging replay learned of deliveries whose
// lease record was lost, for the salvage's CopyPast to act on.
//
// A first delivery's lease record moves the cursor past its message, and
// past every message before it: the cursor delivers in LSN order, so
// their own first deliveries came before and moved it already. When the
// damage took such a record, the replayed cursor is left behind. The
// next record that moves it (a first delivery that survived, a copy or an
// advance) then passes the messages whose lease was lost, up to its own
// message: a jump. Those that no record settled are delivered again
// (copyJumped), and a settle of one finds it by its jump (markGone).
type salvageMarks struct {
	gone  goneMarks  // settled messages the cursor has not passed, or passed in a jump
	jumps []lsnRange // the cursor's first move after each loss: [from, to)
	hole  bool       // records were lost since the last jump
}

// lsnRange is the LSNs from from up to, not including, to.
type lsnRange struct{ from, to uint64 }

// jumped reports whether seq lies in a jump.
func (m *salvageMarks) jumped(seq uint64) bool {
	for _, j := range m.jumps {
		if seq >= j.from && seq < j.to {
			return true
		}
	}
	return false
}

// settledAnyway applies, in a salvaging replay, an ack or a dead-letter
// of a delivery whose lease record the damage took, and reports whether
// it did. The record was appended when that lease held the message: the
// message was acked (or dead-lettered) whatever the lost records said, and
// skipping the record would deliver it again. So is a dead-letter that
// names no lease, which MaxDeliveries made of a ready message instead of
// delivering it again (deadAtLimit): when the damage took every lease and
// nack of that message, skipping it would deliver a poison message
// MaxDeliveries more times. A message not in the table lost its first
// delivery's lease record: it is marked gone (markGone). A purge or
// requeue of a message marked dead changes its mark.
func (s *state) settledAnyway(lsn uint64, r *record) bool {
	ok := false
	switch {
	case r.Op == opAck || r.Op == opDead:
		ok = s.settleLost(r)
	case r.Op == opPurge || r.Op == opRequeueDead:
		ok = s.lost.gone.redo(r)
	case r.Op == opBatchAck || r.Op == opBatchDead:
		ok = s.settleLostPull(r)
	}
	if ok {
		s.last, s.clean = lsn, false
	}
	return ok
}

// settleLost applies the ack or dead-letter r of a message whose lease
// record was lost, or marks the message gone, and reports whether it did.
func (s *state) settleLost(r *record) bool {
	e, ok := s.table.Get(r.Seq)
	if !ok {
		return s.markGone(r)
	}
	s.applyChange(r, e)
	return true
}

// narrowBatch prepares, in a salvaging replay, a sorted batch's ack or
// dead-letter r that names its values: the values of the batch that r
// does not name go back among the pending ones. Without SingleFlight a
// key is pulled again while an earlier batch of it is leased; when damage
// took that earlier pull, its values were still pending at the replayed
// pull of this batch, which took them too. They are not this settle's:
// they come back, as the lost batch's would once the crash ended its
// lease. In any other replay a batch holds exactly what its settle names.
func (s *state) narrowBatch(r *record) {
	if (r.Op != opBatchAck && r.Op != opBatchDead) || len(r.Payload) == 0 {
		return
	}
	if seqs, err := decodeBatchSeqs(r.Payload, r.Lease); err == nil {
		s.sorted.Narrow(r.Lease, seqs)
	}
}

// settleLostPull applies a sorted batch's ack or dead-letter r whose pull
// record was lost, and reports whether it did: r settles the values it
// names as the batch they were (index.Sorted.Retake). They are still
// pending in the replayed state, or, without SingleFlight, held by the
// replayed batch of a later pull of the key, which took them as pending
// for want of the lost pull: they leave that batch, whose own settle then
// finds only its values, and whose lease, left unsettled, returns only
// those. A record from before the settle records named their values (no
// Payload: told by it, not by the Key, which may be the empty key) is left
// to the skip, and so are values neither pending nor leased.
func (s *state) settleLostPull(r *record) bool {
	if len(r.Payload) == 0 {
		return false
	}
	if _, ok := s.sorted.Batch(r.Lease); ok {
		return false // the check failed for another reason
	}
	seqs, err := decodeBatchSeqs(r.Payload, r.Lease)
	if err != nil {
		return false
	}
	if _, ok := s.sorted.Retake(r.Key, seqs, r.Lease, r.At, r.At); !ok {
		return false
	}
	s.applyBatch(r)
	return true
}

// markGone marks the never-delivered message r.Seq, which r acks or
// dead-letters, as gone, and reports whether it did: at or after the
// cursor, or behind it in a jump (salvageMarks), not otherwise.
//
// The cursor itself stays where it is: moving it past r.Seq would skip
// the messages pending between the two. The marks live only until the
// salvage's CopyPast, which copies forward the never-delivered messages of
// every jump and from the cursor past the damage (the lost lease record
// lies before its end, the marked message before the lease): it leaves an
// acked one behind and copies a dead-lettered one as dead (opMoveDead). What
// the marks said is then in the log and in the snapshot that follows, and
// the marks go.
func (s *state) markGone(r *record) bool {
	if r.Seq < s.cursor && !s.lost.jumped(r.Seq) {
		return false
	}
	if s.lost.gone == nil {
		s.lost.gone = goneMarks{}
	}
	s.lost.gone[r.Seq] = goneMark{dead: r.Op == opDead, reason: r.Reason}
	if r.Op == opAck {
		s.counts.Acked++
	} else {
		s.counts.DeadLettered++
	}
	return true
}

// goneMarks are the never-delivered messages, by Seq, that a salvaging
// replay found settled by a record whose lease record was lost
// (markGone).
type goneMarks map[uint64]goneMark

// goneMark is how a marked message was settled.
type goneMark struct {
	dead   bool   // dead-lettered, with reason; else acked or purged
	reason string // why it was dead-lettered
}

// copy makes rec, the cursor move of message seq, what the mark of seq
// says, and reports whether the message is to be copied: not when it was
// acked or purged; as dead when it was dead-lettered.
func (g goneMarks) copy(seq uint64, rec *record) bool {
	m, ok := g[seq]
	switch {
	case !ok:
		return true
	case !m.dead:
		return false
	}
	rec.Op = opMoveDead
	rec.Reason, rec.Count = m.reason, 1
	return true
}

// redo applies to a message marked dead a later purge (it is gone) or
// requeue (it is pending again at the cursor), and reports whether it did.
func (g goneMarks) redo(r *record) bool {
	m, ok := g[r.Seq]
	if !ok || !m.dead {
		return false
	}
	if r.Op == opRequeueDead {
		delete(g, r.Seq)
	} else {
		g[r.Seq] = goneMark{}
	}
	return true
}

func (s *state) Skip(lsn uint64) { s.skip(lsn) }
func (s *state) Last() uint64    { return s.last }
func (s *state) Need() uint64    { return lowWater(s) }
func (s *state) Clean() bool     { return s.clean }

// fill copies what recovery.Recover reports into r.
func (r *Recovery) fill(rep recovery.Report) {
	r.SnapshotLSN, r.SnapshotLost, r.LostBefore = rep.SnapshotLSN, rep.SnapshotLost, rep.LostBefore
	r.Log, r.Clean = rep.Log, rep.Clean
	r.Replayed, r.Skipped, r.Rewritten = rep.Replayed, rep.Skipped, rep.Rewritten
	r.Requeued, r.DeadOnOpen = rep.Requeued, rep.DeadOnOpen
}

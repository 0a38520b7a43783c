package queue

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// BatchReceipt names one delivery of a pulled batch: with it a process
// that no longer holds the Batch (another process, a later run) can ack,
// nack, extend or dead-letter it. It stays valid across a clean Close.
//
// The pull record that gives the lease its LSN is not fsynced before Pull
// returns; a power loss can take it, and the next run then gives its LSN
// to another record, maybe another key's pull. At tells that pull from the
// one the receipt names: a receipt whose At is not the batch's is refused
// (ErrLeaseLost), never settles a batch its holder did not get.
type BatchReceipt struct {
	Lease uint64 // LSN of the pull record
	At    int64  // unix ns of the pull (Batch.PulledAt); 0: not checked
}

// String returns the receipt as "b<lease>.<at>" ("b<lease>" when At is 0),
// the form ParseBatchReceipt reads; the prefix keeps it apart from a
// message Receipt.
func (r BatchReceipt) String() string {
	s := "b" + strconv.FormatUint(r.Lease, 10)
	if r.At != 0 {
		s += "." + strconv.FormatInt(r.At, 10)
	}
	return s
}

// ParseBatchReceipt reads a receipt written by BatchReceipt.String.
func ParseBatchReceipt(s string) (BatchReceipt, error) {
	rest, ok := strings.CutPrefix(s, "b")
	lease, at, hasAt := strings.Cut(rest, ".")
	r := BatchReceipt{}
	var err error
	r.Lease, err = strconv.ParseUint(lease, 10, 64)
	if err == nil && hasAt {
		r.At, err = strconv.ParseInt(at, 10, 64)
	}
	if !ok || err != nil || r.Lease == 0 || (hasAt && r.At == 0) {
		return BatchReceipt{}, fmt.Errorf("%w: batch receipt %q is not b<lease>.<at>", ErrInvalidOptions, s)
	}
	return r, nil
}

// checkBatchReceipt refuses a receipt that names another pull than the one
// now leased under its lease (see BatchReceipt). Within a run an LSN names
// one record, so the settle that follows, under the lock again, settles
// the batch checked here or finds it gone.
func (q *Queue) checkBatchReceipt(r BatchReceipt) error {
	if r.At == 0 {
		return nil
	}
	q.mu.Lock()
	b, ok := q.mu.st.sorted.Batch(r.Lease)
	q.mu.Unlock()
	if ok && b.At != r.At {
		return q.refused(fmt.Errorf("%w: batch %s: the batch leased as %d now was pulled at %d (a crash lost the pull the receipt names)",
			ErrLeaseLost, r, r.Lease, b.At))
	}
	return nil
}

// DeadValue is a value in a sorted queue's dead set. Seq and PublishedAt
// together name it (RequeueDeadValue, PurgeDeadValue): a power loss under
// SyncNever or SyncInterval can take a value's publish, and the next run
// gives its Seq to another publish, made at another time.
type DeadValue[K SortKey] struct {
	Seq         uint64    // the LSN of its publish
	Key         string    // its message key
	Sort        K         // its sort key
	Reason      string    // why it was dead-lettered
	Deliveries  int       // times it was pulled
	PublishedAt time.Time // when it was published
	Payload     []byte    // its payload
}

// DeadValues returns up to max dead values whose Seq is at least from, in
// Seq order, with their payloads; max <= 0 means all of them. A value
// whose payload cannot be read (damage, ErrCorrupt) is listed all the
// same, as Queue.DeadLetters lists a damaged letter: without payload, its
// reason ending with "; corrupt record: " and the read error, so that it
// can still be told and purged by its name (RequeueDead refuses it).
// Another read error fails the call. The values are read in pages as
// Queue.DeadLetters reads the letters: a value no longer dead once its
// page is read (purged or requeued meanwhile, compacted out of the log or
// not) is left out, as if gone before the call, and the call returns
// fewer than max values only when no more are dead after the last one
// it read.
func (s *Sorted[K]) DeadValues(from uint64, max int) ([]DeadValue[K], error) {
	out := []DeadValue[K]{}
	for {
		want := max - len(out) // max <= 0: all
		ds, err := s.q.viewedDeadValues(from, want)
		if err != nil {
			return nil, err
		}
		page, err := s.deadValuePage(ds)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if max <= 0 || len(ds) < want || len(out) == max {
			return out, nil
		}
		from = ds[len(ds)-1].Seq + 1
	}
}

// viewedDeadValues returns up to max dead values of the index the views
// show whose Seq is at least from; max <= 0 means all of them.
func (q *Queue) viewedDeadValues(from uint64, max int) ([]index.DeadValue, error) {
	var ds []index.DeadValue
	err := q.view(func(st *state) {
		st.sorted.DeadFrom(from, func(d index.DeadValue) bool {
			ds = append(ds, d)
			return max <= 0 || len(ds) < max
		})
	})
	return ds, err
}

// deadValuePage reads the payloads of the dead values ds and returns
// those still dead once it read them all (see DeadValues).
func (s *Sorted[K]) deadValuePage(ds []index.DeadValue) ([]DeadValue[K], error) {
	q := s.q
	out := make([]DeadValue[K], 0, len(ds))
	for _, d := range ds {
		v, err := s.deadValue(d)
		if errors.Is(err, wal.ErrNotFound) && !q.isDeadValue(d.Seq) {
			continue // purged or requeued, and compacted out of the log, meanwhile
		}
		reason := d.Reason
		if errors.Is(err, ErrCorrupt) {
			reason += "; " + corruptReason + err.Error()
			v, err = s.value(d.SortedValue, []byte{}) // from the index alone
			v.Payload = nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, DeadValue[K]{Seq: d.Seq, Key: d.Key, Sort: v.Sort, Reason: reason,
			Deliveries: v.Deliveries, PublishedAt: v.PublishedAt, Payload: v.Payload})
	}
	err := q.view(func(st *state) {
		out = slices.DeleteFunc(out, func(d DeadValue[K]) bool {
			_, ok := deadValueIn(st.sorted, d.Seq)
			return !ok
		})
	})
	return out, err
}

// deadValue reads the dead value d with its payload. A compaction may copy
// it forward and cut the log behind it while DeadValues reads: the read
// then follows the copy, as a message's does (readPayload).
func (s *Sorted[K]) deadValue(d index.DeadValue) (Value[K], error) {
	var v Value[K]
	err := s.q.follow(d.Loc, func(uint64) error {
		var err error
		v, err = s.value(d.SortedValue, nil)
		return err
	}, func() (uint64, bool) {
		cur, ok := s.q.deadValue(d.Seq)
		d = advanced(d, cur, ok)
		return cur.Loc, ok
	})
	return v, err
}

// deadValue returns the dead value seq as the index holds it now.
func (q *Queue) deadValue(seq uint64) (index.DeadValue, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deadValueLocked(seq)
}

// isDeadValue reports whether the value seq is dead now.
func (q *Queue) isDeadValue(seq uint64) bool {
	_, ok := q.deadValue(seq)
	return ok
}

// deadValueLocked is deadValue with q.mu held.
func (q *Queue) deadValueLocked(seq uint64) (index.DeadValue, bool) {
	return deadValueIn(q.mu.st.sorted, seq)
}

// deadValueIn returns the dead value seq of the sorted index.
func deadValueIn(sorted *index.Sorted, seq uint64) (index.DeadValue, bool) {
	var out index.DeadValue
	found := false
	sorted.DeadFrom(seq, func(d index.DeadValue) bool {
		out, found = d, d.Seq == seq
		return false
	})
	return out, found
}

// RequeueDead puts the dead value seq back among the pending ones, at its
// sort key, with its delivery count reset. It checks the value's payload
// first, as Queue.RequeueDead checks a letter's: a value it cannot read
// for damage (DeadValues lists it as a corrupt record) is refused with an
// error wrapping ErrCorrupt, and stays dead, as a requeued one could only
// fail again at each pull; purge it, or repair the directory first (walq
// repair). A check that fails otherwise fails the call with its error
// (ErrClosed once the queue is closed), and the value stays dead. A value
// purged or requeued meanwhile is not found (ErrNotFound). On a poisoned
// log it returns the error that poisoned it, before ErrNotFound, as every
// change of the dead set does.
//
// A seq alone may name another value than the one it was read for: after
// a power loss under SyncNever or SyncInterval the lost tail's LSNs go to
// the next run's publishes, and a seq read before the crash (DeadValues,
// walq dlq list) may name a value dead-lettered since. RequeueDeadValue
// refuses such a name.
func (s *Sorted[K]) RequeueDead(seq uint64) error { return s.q.requeueDeadValue(seq, nil) }

// PurgeDead removes the dead value seq for good. It reads no payload. A
// seq read before a crash may name another value (see RequeueDead);
// PurgeDeadValue refuses it. On a poisoned log it returns the error that
// poisoned it, before ErrNotFound.
func (s *Sorted[K]) PurgeDead(seq uint64) error { return s.q.purgeDeadValue(seq, nil) }

// RequeueDeadValue is RequeueDead of the dead value d, as DeadValues
// returned it: it acts only while the dead value d.Seq is the one
// published at d.PublishedAt (to the nanosecond), and otherwise returns
// ErrNotFound and changes nothing. A name read before a power loss thus
// never reaches another value that took its Seq after it (see DeadValue).
// Other fields of d are not checked. A value it cannot read is refused
// as RequeueDead refuses it.
func (s *Sorted[K]) RequeueDeadValue(d DeadValue[K]) error {
	return s.q.requeueDeadValue(d.Seq, &d.PublishedAt)
}

// PurgeDeadValue is PurgeDead of the dead value d, fenced as
// RequeueDeadValue is: ErrNotFound, and nothing removed, unless the dead
// value d.Seq was published at d.PublishedAt.
func (s *Sorted[K]) PurgeDeadValue(d DeadValue[K]) error {
	return s.q.purgeDeadValue(d.Seq, &d.PublishedAt)
}

// RequeueAllDead puts every dead value whose payload it can read back and
// returns how many. The values it cannot read for damage stay dead (see
// RequeueDead): it requeues the others, and returns their count with an
// error wrapping ErrCorrupt that names the values it left (the first few,
// and how many more). A value purged or requeued while it checks the
// values is left out, as if gone before the call. A check that fails
// otherwise fails the call before it requeues anything. On a poisoned log
// it returns the error that poisoned it.
func (s *Sorted[K]) RequeueAllDead() (int, error) { return s.q.requeueAllDeadValues() }

// PurgeAllDead removes every dead value and returns how many. It reads no
// payload. On a poisoned log it returns the error that poisoned it.
func (s *Sorted[K]) PurgeAllDead() (int, error) {
	q := s.q
	q.mu.Lock()
	if err := q.deadRefusedLocked(); err != nil {
		q.mu.Unlock()
		return 0, err
	}
	var seqs []uint64
	q.mu.st.sorted.Dead(func(d index.DeadValue) bool {
		seqs = append(seqs, d.Seq)
		return true
	})
	return q.changeSeqsLocked(opValuePurge, seqs, false)
}

// requeueDeadValue requeues the dead value seq; when at is not nil, only
// if it was published at *at, to the nanosecond. It checks the value's
// payload first, outside the lock, and refuses a value it cannot read.
func (q *Queue) requeueDeadValue(seq uint64, at *time.Time) error {
	q.mu.Lock()
	d, err := q.findDeadValueLocked(seq, at)
	q.mu.Unlock()
	if err == nil {
		err = q.checkDeadValueReadable(d)
	}
	if err != nil {
		return err
	}
	q.mu.Lock()
	if cur, ok := q.deadValueLocked(seq); !ok || cur.At != d.At {
		q.mu.Unlock()
		return q.noDeadValue(seq) // requeued or purged meanwhile
	}
	_, err = q.changeSeqsLocked(opValueRevive, []uint64{seq}, true)
	return err
}

// noDeadValue is the error of a change of the dead value seq that is not
// there: deadRefusedLocked's, else ErrNotFound.
func (q *Queue) noDeadValue(seq uint64) error {
	q.mu.Lock()
	err := q.deadRefusedLocked()
	q.mu.Unlock()
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: no dead value %d", ErrNotFound, seq)
}

// purgeDeadValue purges the dead value seq; when at is not nil, only if
// it was published at *at, to the nanosecond.
func (q *Queue) purgeDeadValue(seq uint64, at *time.Time) error {
	q.mu.Lock()
	if _, err := q.findDeadValueLocked(seq, at); err != nil {
		q.mu.Unlock()
		return err
	}
	_, err := q.changeSeqsLocked(opValuePurge, []uint64{seq}, false)
	return err
}

// findDeadValueLocked returns the dead value seq; when at is not nil,
// only if it was published at *at, to the nanosecond. q.mu is held.
func (q *Queue) findDeadValueLocked(seq uint64, at *time.Time) (index.DeadValue, error) {
	if err := q.deadRefusedLocked(); err != nil {
		return index.DeadValue{}, err
	}
	d, ok := q.deadValueLocked(seq)
	if !ok {
		return index.DeadValue{}, fmt.Errorf("%w: no dead value %d", ErrNotFound, seq)
	}
	if at != nil && (at.IsZero() || at.UnixNano() != d.At) {
		return index.DeadValue{}, fmt.Errorf("%w: no dead value %d published at %s: the dead value %d was published at %s (a crash lost the value the name was read for)",
			ErrNotFound, seq, at.UTC().Format(time.RFC3339Nano), seq, time.Unix(0, d.At).UTC().Format(time.RFC3339Nano))
	}
	return d, nil
}

// requeueAllDeadValues requeues every dead value it can read, and reports
// the ones it left.
func (q *Queue) requeueAllDeadValues() (int, error) {
	ds, err := q.deadValues()
	if err != nil {
		return 0, err
	}
	seqs := make([]uint64, 0, len(ds))
	left := damage{kind: "dead value"}
	for _, d := range ds {
		switch err := q.checkDeadValuePayload(d); {
		case err == nil:
			seqs = append(seqs, d.Seq)
		case errors.Is(err, errDeadGone): // purged or requeued meanwhile
		case errors.Is(err, ErrCorrupt):
			left.add(deadValueName(d), err)
		default:
			return 0, q.refusal(deadValueName(d), err)
		}
	}
	q.mu.Lock()
	if err := q.deadRefusedLocked(); err != nil {
		q.mu.Unlock()
		return 0, err
	}
	seqs = slices.DeleteFunc(seqs, func(seq uint64) bool { // requeued or purged meanwhile
		_, ok := q.deadValueLocked(seq)
		return !ok
	})
	n, err := q.changeSeqsLocked(opValueRevive, seqs, true)
	return n, joinErrors(err, left.err())
}

// deadValues returns every dead value as the index holds it now.
func (q *Queue) deadValues() ([]index.DeadValue, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.deadRefusedLocked(); err != nil {
		return nil, err
	}
	var ds []index.DeadValue
	q.mu.st.sorted.Dead(func(d index.DeadValue) bool {
		ds = append(ds, d)
		return true
	})
	return ds, nil
}

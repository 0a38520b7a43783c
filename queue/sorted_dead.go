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
		return fmt.Errorf("%w: batch %s: the batch leased as %d now was pulled at %d (a crash lost the pull the receipt names)",
			ErrLeaseLost, r, r.Lease, b.At)
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
// can still be told, requeued or purged by its name. Another read error
// fails the call.
func (s *Sorted[K]) DeadValues(from uint64, max int) ([]DeadValue[K], error) {
	q := s.q
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	var ds []index.DeadValue
	q.mu.st.sorted.DeadFrom(from, func(d index.DeadValue) bool {
		ds = append(ds, d)
		return max <= 0 || len(ds) < max
	})
	q.mu.Unlock()
	out := make([]DeadValue[K], 0, len(ds))
	for _, d := range ds {
		v, err := s.deadValue(d)
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
	return out, nil
}

// deadValue reads the dead value d with its payload. A compaction may copy
// it forward and cut the log behind it while DeadValues reads: the read
// then follows the copy, as a message's does (readPayload).
func (s *Sorted[K]) deadValue(d index.DeadValue) (Value[K], error) {
	for tries := 0; ; tries++ {
		v, err := s.value(d.SortedValue, nil)
		if err == nil || !errors.Is(err, wal.ErrNotFound) || tries > 2 {
			return v, err
		}
		cur, ok := s.q.deadValue(d.Seq)
		if !ok || cur.Loc == d.Loc {
			return v, err
		}
		d = cur
	}
}

// deadValue returns the dead value seq as the index holds it now.
func (q *Queue) deadValue(seq uint64) (index.DeadValue, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deadValueLocked(seq)
}

// deadValueLocked is deadValue with q.mu held.
func (q *Queue) deadValueLocked(seq uint64) (index.DeadValue, bool) {
	var out index.DeadValue
	found := false
	q.mu.st.sorted.DeadFrom(seq, func(d index.DeadValue) bool {
		out, found = d, d.Seq == seq
		return false
	})
	return out, found
}

// RequeueDead puts the dead value seq back among the pending ones, at its
// sort key, with its delivery count reset. It reads the value's payload
// first: a value it cannot read (DeadValues lists it as a corrupt record)
// is refused, with an error wrapping the read error (ErrCorrupt for
// damage), and stays dead, as a requeued one could only fail again at
// each pull. Purge it, or repair the directory first (walq repair).
//
// A seq alone may name another value than the one it was read for: after
// a power loss under SyncNever or SyncInterval the lost tail's LSNs go to
// the next run's publishes, and a seq read before the crash (DeadValues,
// walq dlq list) may name a value dead-lettered since. RequeueDeadValue
// refuses such a name.
func (s *Sorted[K]) RequeueDead(seq uint64) error {
	return s.q.changeDeadValue(seq, nil, opValueRevive)
}

// PurgeDead removes the dead value seq for good. A seq read before a crash
// may name another value (see RequeueDead); PurgeDeadValue refuses it.
func (s *Sorted[K]) PurgeDead(seq uint64) error { return s.q.changeDeadValue(seq, nil, opValuePurge) }

// RequeueDeadValue is RequeueDead of the dead value d, as DeadValues
// returned it: it acts only while the dead value d.Seq is the one
// published at d.PublishedAt (to the nanosecond), and otherwise returns
// ErrNotFound and changes nothing. A name read before a power loss thus
// never reaches another value that took its Seq after it (see DeadValue).
// Other fields of d are not checked. A value it cannot read is refused
// as RequeueDead refuses it.
func (s *Sorted[K]) RequeueDeadValue(d DeadValue[K]) error {
	return s.q.changeDeadValue(d.Seq, &d.PublishedAt, opValueRevive)
}

// PurgeDeadValue is PurgeDead of the dead value d, fenced as
// RequeueDeadValue is: ErrNotFound, and nothing removed, unless the dead
// value d.Seq was published at d.PublishedAt.
func (s *Sorted[K]) PurgeDeadValue(d DeadValue[K]) error {
	return s.q.changeDeadValue(d.Seq, &d.PublishedAt, opValuePurge)
}

// RequeueAllDead puts every dead value whose payload it can read back and
// returns how many. The values it cannot read stay dead (see RequeueDead):
// it requeues the others, and returns their count with an error that
// joins one error for each value it left (ErrCorrupt for damage), naming
// it.
func (s *Sorted[K]) RequeueAllDead() (int, error) { return s.q.changeAllDeadValues(opValueRevive) }

// PurgeAllDead removes every dead value and returns how many.
func (s *Sorted[K]) PurgeAllDead() (int, error) { return s.q.changeAllDeadValues(opValuePurge) }

// changeDeadValue requeues or purges the dead value seq; when at is not
// nil, only if it was published at *at, to the nanosecond. A requeue
// reads the value's payload first, and refuses a value it cannot read.
func (q *Queue) changeDeadValue(seq uint64, at *time.Time, o op) error {
	d, err := q.findDeadValue(seq, at)
	if err == nil && o == opValueRevive {
		err = q.checkDeadValueReadable(d)
	}
	if err != nil {
		return err
	}
	q.mu.Lock()
	if cur, ok := q.deadValueLocked(seq); !ok || cur.At != d.At {
		q.mu.Unlock()
		return fmt.Errorf("%w: no dead value %d", ErrNotFound, seq) // requeued or purged meanwhile
	}
	_, err = q.changeSeqsLocked(o, []uint64{seq}, o == opValueRevive)
	return err
}

// findDeadValue returns the dead value seq; when at is not nil, only if
// it was published at *at, to the nanosecond.
func (q *Queue) findDeadValue(seq uint64, at *time.Time) (index.DeadValue, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return index.DeadValue{}, ErrClosed
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

// changeAllDeadValues requeues or purges every dead value; a requeue
// leaves the values it cannot read, and reports them.
func (q *Queue) changeAllDeadValues(o op) (int, error) {
	ds, err := q.deadValues()
	if err != nil {
		return 0, err
	}
	seqs := make([]uint64, 0, len(ds))
	var errs []error
	for _, d := range ds {
		if o == opValueRevive {
			if err := q.checkDeadValueReadable(d); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		seqs = append(seqs, d.Seq)
	}
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	seqs = slices.DeleteFunc(seqs, func(seq uint64) bool { // requeued or purged meanwhile
		_, ok := q.deadValueLocked(seq)
		return !ok
	})
	n, err := q.changeSeqsLocked(o, seqs, o == opValueRevive)
	return n, joinErrors(err, errors.Join(errs...))
}

// deadValues returns every dead value as the index holds it now.
func (q *Queue) deadValues() ([]index.DeadValue, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return nil, ErrClosed
	}
	var ds []index.DeadValue
	q.mu.st.sorted.Dead(func(d index.DeadValue) bool {
		ds = append(ds, d)
		return true
	})
	return ds, nil
}

// checkDeadValueReadable reads the payload of the dead value d, which a
// requeue is about to make deliverable, and fails if it cannot. A
// compaction may copy it forward and cut the log behind it meanwhile: the
// read then follows the copy.
func (q *Queue) checkDeadValueReadable(d index.DeadValue) error {
	for tries := 0; ; tries++ {
		r, err := q.readRecord(d.Loc)
		if err == nil {
			err = checkValueRecord(r, d.SortedValue)
		}
		if err == nil {
			return nil
		}
		cur, ok := q.deadValue(d.Seq)
		if !errors.Is(err, wal.ErrNotFound) || tries > 2 || !ok || cur.Loc == d.Loc {
			return fmt.Errorf("queue: dead value %d (key %q) not requeued, its payload cannot be read (purge it, or repair the directory first): %w",
				d.Seq, d.Key, err)
		}
		d = cur
	}
}

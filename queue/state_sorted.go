package queue

import (
	"fmt"

	"github.com/walq/walq/index"
)

// applySorted applies a sorted queue's record.
func (s *state) applySorted(lsn uint64, r *record, size int) error {
	sq := s.sorted
	switch r.Op {
	case opPublish:
		sq.Publish(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: lsn, Loc: lsn, Size: uint32(size), At: r.At})
		if sq.CachedBytes()+int64(len(r.Payload)) <= s.cacheBytes {
			sq.Cache(lsn, r.Payload)
		}
		s.counts.Published++
		return nil
	case opPull:
		if !sq.HasPending(r.Key) {
			return fmt.Errorf("%w: pull %d of key %q with no pending values", ErrCorrupt, lsn, r.Key)
		}
		sq.Take(r.Key, lsn, r.At, r.Due)
		s.counts.Pulled++
		return nil
	case opValueRevive, opValuePurge:
		return s.applyDeadValue(r)
	}
	return s.applyBatch(r)
}

func (s *state) applyBatch(r *record) error {
	sq := s.sorted
	var ok bool
	switch r.Op {
	case opBatchAck:
		_, ok = sq.Ack(r.Lease)
		s.counts.BatchesAcked++
	case opBatchExtend:
		ok = sq.Extend(r.Lease, r.Due)
	case opBatchReturn:
		limit := r.Count
		_, ok = sq.Return(r.Lease, r.Due, func(v index.SortedValue) bool {
			return limit > 0 && v.Deliveries >= limit
		}, r.Reason)
	case opBatchDead:
		_, ok = sq.Return(r.Lease, 0, func(index.SortedValue) bool { return true }, r.Reason)
	}
	if !ok {
		return fmt.Errorf("%w: %s of unknown batch %d", ErrCorrupt, opName(r.Op), r.Lease)
	}
	return nil
}

func (s *state) applyDeadValue(r *record) error {
	ok := false
	if r.Op == opValueRevive {
		ok = s.sorted.Revive(r.Seq)
	} else {
		_, ok = s.sorted.RemoveDead(r.Seq)
	}
	if !ok {
		return fmt.Errorf("%w: %s of unknown dead value %d", ErrCorrupt, opName(r.Op), r.Seq)
	}
	return nil
}

package queue

import (
	"fmt"

	"github.com/walq/walq/index"
)

// checkSorted verifies that a sorted queue's record finds what it names:
// pending values of the key it pulls, the batch it settles, the dead value
// it revives or purges.
func (s *state) checkSorted(r *record) error {
	sq := s.sorted
	switch r.Op {
	case opPull:
		if !sq.HasPending(r.Key) {
			return fmt.Errorf("%w: pull of key %q with no pending values", ErrInvalidChange, r.Key)
		}
	case opValueDead:
		if !sq.HasPendingValue(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}) {
			return fmt.Errorf("%w: value-dead of value %d that is not pending", ErrInvalidChange, r.Seq)
		}
	case opValueRevive, opValuePurge:
		if !sq.HasDead(r.Seq) {
			return fmt.Errorf("%w: %s of unknown dead value %d", ErrInvalidChange, opName(r.Op), r.Seq)
		}
	case opBatchAck, opBatchExtend, opBatchReturn, opBatchDead:
		if _, ok := sq.Batch(r.Lease); !ok {
			return fmt.Errorf("%w: %s of unknown batch %d", ErrInvalidChange, opName(r.Op), r.Lease)
		}
	}
	return nil
}

// applySorted applies a sorted queue's record that checkSorted accepted.
func (s *state) applySorted(lsn uint64, r *record, size int) {
	sq := s.sorted
	switch r.Op {
	case opPublish:
		sq.Publish(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: lsn, Loc: lsn, Size: uint32(size), At: r.At})
		if sq.CachedBytes()+int64(len(r.Payload)) <= s.cacheBytes {
			sq.Cache(lsn, r.Payload)
		}
		s.counts.Published++
	case opPull:
		sq.Take(r.Key, lsn, r.At, r.Due)
		s.counts.Pulled++
	case opValueRevive:
		sq.Revive(r.Seq)
	case opValuePurge:
		sq.RemoveDead(r.Seq)
	case opValueDead:
		sq.KillPending(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}, r.Reason) // check found it
	default:
		s.applyBatch(r)
	}
}

// applyBatch settles a leased batch that checkSorted found.
func (s *state) applyBatch(r *record) {
	sq := s.sorted
	switch r.Op {
	case opBatchAck:
		sq.Ack(r.Lease)
		s.counts.BatchesAcked++
	case opBatchExtend:
		sq.Extend(r.Lease, r.Due)
	case opBatchReturn:
		limit := r.maxDeliveries()
		sq.Return(r.Lease, r.Due, func(v index.SortedValue) bool {
			return limit > 0 && v.Deliveries >= limit
		}, r.Reason)
	case opBatchDead:
		sq.Return(r.Lease, 0, func(index.SortedValue) bool { return true }, r.Reason)
	}
}

package queue

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/walq/walq/index"
)

// A sorted batch's settle record (batch-ack, batch-dead) names the values
// it settles, so that a salvage can settle them when damage took the
// batch's pull record: the record's Key is the batch's key and its Payload
// the values' Seqs, packed as
//
//	uvarint(lease - Seq[0]) | zigzag-uvarint(Seq[1] - Seq[0]) | ... | zigzag-uvarint(Seq[n-1] - Seq[n-2])
//
// in the batch's order (sort order): every Seq is below the lease (a
// value was published before its pull), and the values of one key were
// published close together, so each takes a byte or a few. This form is
// part of the log format. A record from before it has neither Key nor
// Payload.

// batchSeqs returns the packed Seqs of the values vs of the batch leased
// as lease, in one allocation for the usual few bytes a value.
func batchSeqs(lease uint64, vs []index.SortedValue) []byte {
	return appendBatchSeqs(make([]byte, 0, 8+4*len(vs)), lease, vs)
}

// appendBatchSeqs appends the packed Seqs of the values vs of the batch
// leased as lease to dst.
func appendBatchSeqs(dst []byte, lease uint64, vs []index.SortedValue) []byte {
	for i, v := range vs {
		if i == 0 {
			dst = binary.AppendUvarint(dst, lease-v.Seq)
			continue
		}
		dst = binary.AppendVarint(dst, int64(v.Seq-vs[i-1].Seq))
	}
	return dst
}

// decodeBatchSeqs returns the Seqs that appendBatchSeqs packed into b for
// the batch leased as lease, in ascending order.
func decodeBatchSeqs(b []byte, lease uint64) ([]uint64, error) {
	var seqs []uint64
	err := walkBatchSeqs(b, lease, func(seq uint64) { seqs = append(seqs, seq) })
	if err != nil {
		return nil, err
	}
	slices.Sort(seqs)
	return seqs, nil
}

// checkBatchSeqs reports whether b is a packing of Seqs for the batch
// leased as lease, without keeping them; decode runs it on every
// batch-ack and batch-dead.
func checkBatchSeqs(b []byte, lease uint64) error {
	return walkBatchSeqs(b, lease, nil)
}

// walkBatchSeqs passes each Seq packed into b, in packing order, to fn
// (nil: none), or returns ErrInvalidChange at the first that does not
// decode or lies outside 1..lease-1.
func walkBatchSeqs(b []byte, lease uint64, fn func(uint64)) error {
	var seq uint64
	for i := 0; len(b) > 0; i++ {
		if i == 0 {
			d, n := binary.Uvarint(b)
			if n <= 0 || d >= lease {
				return fmt.Errorf("%w: batch %d: bad first value seq", ErrInvalidChange, lease)
			}
			seq, b = lease-d, b[n:]
		} else {
			d, n := binary.Varint(b)
			if n <= 0 {
				return fmt.Errorf("%w: batch %d: bad value seq %d", ErrInvalidChange, lease, i)
			}
			seq, b = seq+uint64(d), b[n:]
		}
		if seq == 0 || seq >= lease {
			return fmt.Errorf("%w: batch %d: value seq %d out of range", ErrInvalidChange, lease, seq)
		}
		if fn != nil {
			fn(seq)
		}
	}
	return nil
}

package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/index"
)

// ReadLog shows a record's Due as a time only where Due is one: an
// advance that recounts keeps a byte total there (pendingCount).
func TestPublicRecordDue(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    record
		due  time.Time
	}{
		{"nack", record{Op: opNack, Seq: 1, Lease: 2, At: 5, Due: 9}, time.Unix(0, 9)},
		{"advance", record{Op: opAdvance, Seq: 9, At: 5}, time.Time{}},
		{"advance that recounts", record{Op: opAdvance, Seq: 9, At: 5, Flags: flagRecount, Enq: 3, Due: 120}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := publicRecord(10, &tc.r, 20, Identity{})
			require.Equal(t, tc.due, p.Due)
		})
	}
}

// ReadLog shows the values a batch's ack or dead-letter names as Seqs,
// not as a payload; an older record names none.
func TestPublicRecordValues(t *testing.T) {
	seqs := appendBatchSeqs(nil, 30, []index.SortedValue{{Seq: 20}, {Seq: 7}})
	for _, tc := range []struct {
		name string
		r    record
		want []uint64
	}{
		{"batch-ack", record{Op: opBatchAck, Lease: 30, At: 5, Key: "k", Payload: seqs}, []uint64{7, 20}},
		{"batch-dead", record{Op: opBatchDead, Lease: 30, At: 5, Key: "k", Payload: seqs, Reason: "poison"}, []uint64{7, 20}},
		{"older batch-ack", record{Op: opBatchAck, Lease: 30, At: 5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := publicRecord(31, &tc.r, 20, Identity{})
			require.Equal(t, tc.want, p.Values)
			require.Nil(t, p.Payload)
		})
	}
}

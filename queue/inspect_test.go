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

// ReadLog names a sorted value by its Seq, the LSN of its publish, and a
// batch's delivery by its Lease, the LSN of its pull, as it names an
// enqueue and a lease: the Values and Lease of a batch's ack or
// dead-letter then match the records they refer to.
func TestPublicRecordOwnLSN(t *testing.T) {
	for _, tc := range []struct {
		name       string
		r          record
		seq, lease uint64
	}{
		{"enqueue", record{Op: opEnqueue, ID: "a", At: 5}, 12, 0},
		{"lease", record{Op: opLease, Seq: 3, At: 5, Due: 9}, 3, 12},
		{"publish", record{Op: opPublish, Key: "k", Sort: []byte{1}, At: 5}, 12, 0},
		{"pull", record{Op: opPull, Key: "k", At: 5, Due: 9}, 0, 12},
		{"batch-ack", record{Op: opBatchAck, Lease: 7, At: 5, Key: "k"}, 0, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := publicRecord(12, &tc.r, 20, Identity{})
			require.Equal(t, tc.seq, p.Seq, "Seq")
			require.Equal(t, tc.lease, p.Lease, "Lease")
		})
	}
}

package queue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/index"
)

// TestBatchSeqs checks that the packed Seqs of a batch's settle record
// decode to the batch's Seqs, ascending, and that damaged packings are
// refused rather than read as other values.
func TestBatchSeqs(t *testing.T) {
	vals := func(seqs ...uint64) []index.SortedValue {
		vs := make([]index.SortedValue, len(seqs))
		for i, s := range seqs {
			vs[i].Seq = s
		}
		return vs
	}
	for _, c := range []struct {
		name  string
		lease uint64
		vs    []index.SortedValue
		want  []uint64
	}{
		{"one", 2, vals(1), []uint64{1}},
		{"sort order is not seq order", 300, vals(299, 13, 14, 200), []uint64{13, 14, 199 + 1, 299}},
		{"far apart", 1 << 40, vals(1, 1<<40-1, 1<<20), []uint64{1, 1 << 20, 1<<40 - 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeBatchSeqs(appendBatchSeqs(nil, c.lease, c.vs), c.lease)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	for _, c := range []struct {
		name  string
		b     []byte
		lease uint64
	}{
		{"first at the lease", []byte{0}, 5},
		{"first below 1", []byte{5}, 5},
		{"cut varint", []byte{1, 0x80}, 5},
		{"delta to the lease", []byte{2, 4}, 5},
		{"delta below 1", []byte{2, 5}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeBatchSeqs(c.b, c.lease)
			require.ErrorIs(t, err, ErrInvalidChange)
		})
	}
	seqs, err := decodeBatchSeqs(nil, 5)
	require.NoError(t, err)
	require.Empty(t, seqs, "a record from before the Seqs")
}

// TestBatchSettleRefusesBadPacking checks that a batch-ack or batch-dead
// whose packed value Seqs do not decode is refused as damage (ErrCorrupt)
// when the record is decoded, so that ReadLog and a replay report it
// rather than show or apply it without its values.
func TestBatchSettleRefusesBadPacking(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"first at the lease", []byte{0}},
		{"cut varint", []byte{1, 0x80}},
		{"delta to the lease", []byte{2, 4}},
		{"delta below 1", []byte{2, 5}},
	} {
		for _, o := range []op{opBatchAck, opBatchDead} {
			t.Run(c.name+"/"+opName(o), func(t *testing.T) {
				b := encodeRecord(nil, &record{Op: o, Lease: 5, Key: "k", At: 1, Payload: c.b})
				var r record
				require.ErrorIs(t, decodeRecord(b, &r), ErrCorrupt)
				require.ErrorIs(t, decodeRecordAliased(b, &r), ErrCorrupt)
				r = record{}
				require.ErrorIs(t, decodeMsgpack(b, &r), ErrCorrupt)
			})
		}
	}
	for _, p := range [][]byte{nil, {}, appendBatchSeqs(nil, 5, []index.SortedValue{{Seq: 4}, {Seq: 1}})} {
		b := encodeRecord(nil, &record{Op: opBatchAck, Lease: 5, Key: "k", At: 1, Payload: p})
		var r record
		require.NoError(t, decodeRecord(b, &r), "payload %x", p)
	}
}

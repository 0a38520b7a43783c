package queue

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// TestReplayOtherMsgpackForm: a record in a msgpack form other than
// encodeRecord's, which decodeEncoded does not read and the msgpack
// decoder does, replays as its encodeRecord form does: state.Apply
// decodes it through the msgpack decoder, which sets every ID, and keeps
// nothing of the reader's buffer. The records are applied from one buffer
// overwritten after each call, and the state must be the one the same
// bytes give decoded whole (decodeRecord): the producer-given id refused again, the
// delayed message and the delivered one indexed under their ids.
func TestReplayOtherMsgpackForm(t *testing.T) {
	log := []*record{
		{Op: opEnqueue, ID: "plain-1", At: 10, Payload: []byte("a")},
		{Op: opEnqueue, ID: "producer-2", Flags: flagProducerID, At: 11, Payload: []byte("b")},
		{Op: opEnqueue, ID: "delayed-3", At: 12, Due: 1 << 40, Payload: []byte("c")},
		{Op: opEnqueue, ID: "plain-4", At: 13, Payload: []byte("d")},
		{Op: opLease, Seq: 1, ID: "plain-1", Enq: 10, Size: 30, At: 20, Due: 1 << 41},
		{Op: opMove, Seq: 4, Flags: flagCursor, ID: "plain-4", Enq: 13, Size: 30, At: 21, Payload: []byte("d")},
		{Op: opDead, Seq: 4, At: 22, Reason: "why"},
	}
	o := &Options{DedupWindow: 1 << 40}
	replayed, whole := newState(o), newState(o)
	buf := make([]byte, 0, 512)
	for i, r := range log {
		lsn := uint64(i + 1)
		other := otherFormRecord(t, r)
		var probe record
		require.False(t, decodeEncoded(other, &probe), "record %d: decodeEncoded reads the other form", lsn)

		buf = append(buf[:0], other...)
		require.NoError(t, replayed.Apply(lsn, buf), "record %d", lsn)
		for j := range buf {
			buf[j] = 0xa5
		}
		require.NoError(t, applyWhole(whole, lsn, other), "record %d", lsn)
	}
	require.Equal(t, snapshotBody(t, whole), snapshotBody(t, replayed), "the other form replays to another state")
	require.True(t, replayed.dedup.Has("producer-2"), "the producer-given id is not refused again")
	for seq, id := range map[uint64]string{1: "plain-1", 3: "delayed-3", 4: "plain-4"} {
		e, ok := replayed.table.Get(seq)
		require.True(t, ok, "message %d not indexed", seq)
		require.Equal(t, id, e.ID, "message %d", seq)
	}
}

// otherFormRecord encodes r as msgpackRecord does, but its Seq, Lease,
// Size and Count as int64s (code 0xd3, 8 bytes): msgpack, as another
// encoder may write it, that the msgpack decoder reads and decodeEncoded
// does not.
func otherFormRecord(t *testing.T, r *record) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	require.NoError(t, enc.EncodeArrayLen(recordFields))
	require.NoError(t, enc.EncodeUint(uint64(r.Op)))
	require.NoError(t, enc.EncodeInt64(int64(r.Seq)))
	require.NoError(t, enc.EncodeInt64(int64(r.Lease)))
	require.NoError(t, enc.EncodeString(r.ID))
	require.NoError(t, enc.EncodeUint(uint64(r.Flags)))
	for _, i := range []int64{r.At, r.Due, r.Enq} {
		require.NoError(t, enc.EncodeInt(i))
	}
	require.NoError(t, enc.EncodeInt64(int64(r.Size)))
	require.NoError(t, enc.EncodeInt64(int64(r.Count)))
	require.NoError(t, enc.EncodeString(r.Reason))
	require.NoError(t, enc.EncodeNil()) // no headers
	require.NoError(t, enc.EncodeBytes(r.Payload))
	require.NoError(t, enc.EncodeString(r.Key))
	require.NoError(t, enc.EncodeBytes(r.Sort))
	return buf.Bytes()
}

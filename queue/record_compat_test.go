package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// prevLastOp is the last op that releases before the salvage's dead copy
// knew: their decoder refuses a record of a higher op as ErrCorrupt
// (checkOp), so a plain open of a log holding one fails and a salvage
// skips it.
const prevLastOp = 21

// TestDeadCopyIsRefusedByOlderReleases checks that the salvage's copy of
// a message dead-lettered through a lost lease is written as an op that
// an older release refuses, not as a move it would read as a ready
// message, while an ordinary copy stays readable by it.
func TestDeadCopyIsRefusedByOlderReleases(t *testing.T) {
	gone := goneMarks{9: {dead: true, reason: "poison"}, 10: {}}
	for _, tc := range []struct {
		name    string
		seq     uint64
		refused bool
	}{
		{"dead-lettered", 9, true},
		{"not marked", 11, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &record{Op: opMove, Seq: tc.seq, Flags: flagCursor, ID: "c", Size: 42, Payload: []byte("x")}
			require.True(t, gone.copy(tc.seq, rec))
			b := encodeRecord(nil, rec)
			require.Equal(t, tc.refused, peekOp(b) > prevLastOp, "op %d", peekOp(b))
			var r record
			require.NoError(t, decodeRecord(b, &r), "this release reads it")
			require.Equal(t, *rec, r)
		})
	}
	rec := &record{Op: opMove, Seq: 10, Flags: flagCursor}
	require.False(t, gone.copy(10, rec), "an acked message is not copied")
}

// TestRecordRefusesUnknownFlags checks that a record with a flag bit this
// release does not know is refused as ErrCorrupt, by both decoders, so a
// later format addition made with a new flag is not misread.
func TestRecordRefusesUnknownFlags(t *testing.T) {
	for _, f := range []uint8{16, 32, 64, 128, flagCursor | 16} {
		for _, o := range []op{opEnqueue, opMove, opAdvance, opBatchAck} {
			b := encodeRecord(nil, &record{Op: o, Seq: 3, Flags: f, At: 1})
			var r record
			require.ErrorIs(t, decodeRecord(b, &r), ErrCorrupt, "op %d flags %d", o, f)
			require.ErrorIs(t, decodeRecordAliased(b, &r), ErrCorrupt, "op %d flags %d", o, f)
			r = record{}
			require.ErrorIs(t, decodeMsgpack(b, &r), ErrCorrupt, "op %d flags %d", o, f)
		}
	}
	for _, f := range []uint8{0, flagProducerID, flagSorted, flagCursor, flagRecount} {
		b := encodeRecord(nil, &record{Op: opMove, Seq: 3, Flags: f, At: 1})
		var r record
		require.NoError(t, decodeRecord(b, &r), "flags %d", f)
	}
}

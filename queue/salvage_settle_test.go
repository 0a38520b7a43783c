package queue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/index"
)

// TestSalvageSettlesBatchOfLostPull replays, as a salvage does, a sorted
// key's values whose pull record was lost, then the batch's settle
// record: one that names its values settles exactly those (not the value
// published after the pull); one from before the records named them
// (Lease only) does not apply, as before, and the values stay pending.
func TestSalvageSettlesBatchOfLostPull(t *testing.T) {
	seqs := appendBatchSeqs(nil, 3, []index.SortedValue{{Seq: 2}, {Seq: 1}})
	for _, c := range []struct {
		name     string
		rec      record
		applies  bool
		pending  int
		dead     int
		salvaged bool
	}{
		{"ack", record{Op: opBatchAck, Lease: 3, At: 5, Key: "k", Payload: seqs}, true, 1, 0, true},
		{"dead-letter", record{Op: opBatchDead, Lease: 3, At: 5, Key: "k", Payload: seqs, Reason: "poison"}, true, 1, 2, true},
		{"old ack", record{Op: opBatchAck, Lease: 3, At: 5}, false, 3, 0, true},
		{"old dead-letter", record{Op: opBatchDead, Lease: 3, At: 5, Reason: "poison"}, false, 3, 0, true},
		{"ack, plain open", record{Op: opBatchAck, Lease: 3, At: 5, Key: "k", Payload: seqs}, false, 3, 0, false},
		{"key that holds none of its values", record{Op: opBatchAck, Lease: 3, At: 5, Key: "other", Payload: seqs}, false, 3, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newState(&Options{Salvage: c.salvaged})
			apply := func(lsn uint64, r record) error {
				return st.Apply(lsn, encodeRecord(nil, &r))
			}
			require.NoError(t, apply(1, record{Op: opPublish, Key: "k", Sort: []byte{2}, At: 1}))
			require.NoError(t, apply(2, record{Op: opPublish, Key: "k", Sort: []byte{1}, At: 2}))
			// LSN 3, the pull of k's two values, was lost.
			require.NoError(t, apply(4, record{Op: opPublish, Key: "k", Sort: []byte{0}, At: 4}))
			err := apply(5, c.rec)
			if c.applies {
				require.NoError(t, err)
				require.Equal(t, uint64(5), st.Last())
			} else {
				require.ErrorIs(t, err, ErrCorrupt)
			}
			n := st.sorted.Counts()
			require.Equal(t, c.pending, n.Pending, "pending values")
			require.Equal(t, c.dead, n.Dead, "dead values")
			require.Zero(t, n.Batches, "leased batches")
			if c.pending == 1 {
				require.True(t, st.sorted.HasValue(index.SortedValue{Key: "k", Sort: []byte{0}, Seq: 4}), "the value published after the pull")
			}
			if c.dead > 0 {
				st.sorted.Dead(func(d index.DeadValue) bool {
					require.Equal(t, "poison", d.Reason)
					require.Equal(t, uint32(1), d.Deliveries)
					return true
				})
			}
		})
	}
}

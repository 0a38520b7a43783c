package index_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/index"
)

// TestRetake leases the named pending values of a key as one batch and
// leaves the key's others, and the other keys, pending.
func TestRetake(t *testing.T) {
	pub := func(s *index.Sorted, key string, sort byte, seq uint64) {
		s.Publish(index.SortedValue{Key: key, Sort: []byte{sort}, Seq: seq, Loc: seq, Size: 10})
	}
	for _, c := range []struct {
		name    string
		key     string
		seqs    []uint64
		taken   []uint64 // in sort order
		pending int
	}{
		{"two of three", "k", []uint64{1, 3}, []uint64{3, 1}, 2},
		{"all", "k", []uint64{1, 2, 3}, []uint64{3, 2, 1}, 1},
		{"one not pending", "k", []uint64{2, 9}, []uint64{2}, 3},
		{"none pending", "k", []uint64{4, 9}, nil, 4},
		{"other key's seq", "j", []uint64{1}, nil, 4},
		{"unknown key", "x", []uint64{1}, nil, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := index.NewSorted(true)
			pub(s, "k", 9, 1)
			pub(s, "k", 8, 2)
			pub(s, "k", 7, 3)
			pub(s, "j", 1, 4)
			b, ok := s.Retake(c.key, c.seqs, 10, 5, 6)
			require.Equal(t, c.taken != nil, ok)
			require.Equal(t, c.pending, s.Counts().Pending)
			if !ok {
				require.Zero(t, s.Counts().Batches)
				require.Equal(t, int64(40), s.Bytes())
				return
			}
			var got []uint64
			for _, v := range b.Values {
				got = append(got, v.Seq)
				require.Equal(t, uint32(1), v.Deliveries)
			}
			require.Equal(t, c.taken, got)
			stored, found := s.Batch(10)
			require.True(t, found)
			require.Equal(t, b, stored)
			require.Equal(t, int64(40), s.Bytes(), "the batch's values still need their records")
			_, acked := s.Ack(10)
			require.True(t, acked)
			require.Equal(t, int64(40-10*len(c.taken)), s.Bytes())
			require.Equal(t, c.pending, s.Counts().Pending)
		})
	}
}

// TestNarrow puts the values of a batch that a settle does not name back
// among the pending ones, and leaves the named ones leased.
func TestNarrow(t *testing.T) {
	s := index.NewSorted(false)
	for seq, sort := range map[uint64]byte{1: 9, 2: 8, 3: 7} {
		s.Publish(index.SortedValue{Key: "k", Sort: []byte{sort}, Seq: seq, Loc: seq, Size: 10})
	}
	b := s.Take("k", 10, 5, 6)
	require.Len(t, b.Values, 3)
	require.Zero(t, s.Narrow(10, []uint64{1, 2, 3}), "every value named")
	require.Zero(t, s.Narrow(11, []uint64{1}), "no such batch")
	require.Equal(t, 2, s.Narrow(10, []uint64{2, 9}))
	got, ok := s.Batch(10)
	require.True(t, ok)
	require.Len(t, got.Values, 1)
	require.Equal(t, uint64(2), got.Values[0].Seq)
	require.Equal(t, index.SortedCounts{Pending: 2, Keys: 1, Batches: 1, Leased: 1}, s.Counts())
	key, sort, ok := s.Next()
	require.True(t, ok)
	require.Equal(t, "k", key)
	require.Equal(t, []byte{7}, sort, "value 3 is pending again at its sort key")
	_, ok = s.Ack(10)
	require.True(t, ok)
	require.Equal(t, int64(20), s.Bytes())
	require.Equal(t, 2, s.Counts().Pending)
}

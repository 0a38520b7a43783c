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

// TestRetakeFromAnotherBatch takes a named value that another leased batch
// of the key holds out of that batch, as it is, along with the named
// pending ones; the other batch keeps the rest and is still acked by its
// lease.
func TestRetakeFromAnotherBatch(t *testing.T) {
	s := index.NewSorted(false)
	for seq, sort := range map[uint64]byte{1: 9, 2: 8, 3: 7} {
		s.Publish(index.SortedValue{Key: "k", Sort: []byte{sort}, Seq: seq, Loc: seq, Size: 10})
	}
	s.Publish(index.SortedValue{Key: "j", Sort: []byte{1}, Seq: 4, Loc: 4, Size: 10})
	require.Len(t, s.Take("k", 10, 5, 6).Values, 3)
	require.Len(t, s.Take("j", 11, 5, 6).Values, 1)
	s.Publish(index.SortedValue{Key: "k", Sort: []byte{5}, Seq: 5, Loc: 5, Size: 10})

	b, ok := s.Retake("k", []uint64{1, 4, 5}, 20, 7, 8)
	require.True(t, ok)
	var got []uint64
	var deliveries []uint32
	for _, v := range b.Values {
		got, deliveries = append(got, v.Seq), append(deliveries, v.Deliveries)
	}
	require.Equal(t, []uint64{5, 1}, got, "in sort order; the other key's batch keeps 4")
	require.Equal(t, []uint32{1, 1}, deliveries, "the value taken from a batch keeps its count")
	other, ok := s.Batch(10)
	require.True(t, ok)
	require.Len(t, other.Values, 2)
	j, ok := s.Batch(11)
	require.True(t, ok)
	require.Len(t, j.Values, 1)
	require.Equal(t, index.SortedCounts{Batches: 3, Leased: 5}, s.Counts())
	require.Equal(t, int64(50), s.Bytes())

	_, ok = s.Ack(20)
	require.True(t, ok)
	_, ok = s.Ack(10)
	require.True(t, ok)
	require.Equal(t, int64(10), s.Bytes())
	require.Equal(t, index.SortedCounts{Batches: 1, Leased: 1}, s.Counts())
	loc, ok := s.MinLoc()
	require.True(t, ok)
	require.Equal(t, uint64(4), loc)
}

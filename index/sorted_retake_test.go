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

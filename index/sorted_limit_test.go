package index_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
)

// TestKillPending: a pending value killed goes to the dead set with its
// delivery count and reason, keeps its bytes and log position, and its
// key's place in the pull order follows the key's next value; a key left
// without values leaves the order.
func TestKillPending(t *testing.T) {
	s := index.NewSorted(false)
	s.Publish(index.SortedValue{Key: "k", Sort: []byte{1}, Seq: 1, Loc: 1, Size: 10, Deliveries: 3})
	s.Publish(index.SortedValue{Key: "k", Sort: []byte{4}, Seq: 2, Loc: 2, Size: 10})
	s.Publish(index.SortedValue{Key: "j", Sort: []byte{3}, Seq: 3, Loc: 3, Size: 10})

	require.True(t, s.KillPending(index.SortedValue{Key: "k", Sort: []byte{1}, Seq: 1}, "why"))
	require.False(t, s.HasPendingValue(index.SortedValue{Key: "k", Sort: []byte{1}, Seq: 1}))
	key, sort, ok := s.Next()
	require.True(t, ok)
	require.Equal(t, "j", key, "k's first value is now 4, after j's 3")
	require.Equal(t, []byte{3}, sort)
	require.Equal(t, index.SortedCounts{Pending: 2, Keys: 2, Dead: 1}, s.Counts())
	require.EqualValues(t, 30, s.Bytes())
	loc, _ := s.MinLoc()
	require.EqualValues(t, 1, loc, "the dead value still needs its record")
	var dead []index.DeadValue
	s.Dead(func(d index.DeadValue) bool { dead = append(dead, d); return true })
	require.Len(t, dead, 1)
	require.Equal(t, "why", dead[0].Reason)
	require.EqualValues(t, 3, dead[0].Deliveries)

	require.True(t, s.KillPending(index.SortedValue{Key: "k", Sort: []byte{4}, Seq: 2}, "why"))
	require.False(t, s.KillPending(index.SortedValue{Key: "k", Sort: []byte{4}, Seq: 2}, "why"), "no longer pending")
	require.Equal(t, index.SortedCounts{Pending: 1, Keys: 1, Dead: 2}, s.Counts())
	var left []uint64
	s.PendingOf("j", func(v index.SortedValue) bool { left = append(left, v.Seq); return true })
	require.Equal(t, []uint64{3}, left)
	s.PendingOf("k", func(index.SortedValue) bool { t.Fatal("k has no pending value"); return false })
}

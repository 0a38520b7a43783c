package index_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
)

func TestTableStates(t *testing.T) {
	tb := index.NewTable()
	tb.Put(index.Entry{Seq: 3, Loc: 3, ID: "c", Size: 10, State: index.Ready})
	tb.Put(index.Entry{Seq: 1, Loc: 1, ID: "a", Size: 10, State: index.Delayed, Due: 100})
	tb.Put(index.Entry{Seq: 2, Loc: 2, ID: "b", Size: 10, State: index.Leased, Due: 50, Lease: 7})
	require.Equal(t, index.Counts{Ready: 1, Delayed: 1, Leased: 1}, tb.Counts())
	require.EqualValues(t, 30, tb.Bytes())

	e, ok := tb.FirstReady()
	require.True(t, ok)
	require.EqualValues(t, 3, e.Seq)
	tb.SetNow(99)
	e, _ = tb.FirstReady()
	require.EqualValues(t, 3, e.Seq, "an entry delayed until after now waits")
	tb.SetNow(100)
	e, _ = tb.FirstReady()
	require.EqualValues(t, 1, e.Seq, "a due entry is ordered by sequence")
	require.Equal(t, index.Delayed, e.State, "a due entry stays as it was put")
	require.Equal(t, index.Counts{Ready: 2, Leased: 1}, tb.Counts())

	require.Empty(t, tb.Expired(49, 10))
	require.Len(t, tb.Expired(50, 10), 1)
	d, ok := tb.NextDeadline()
	require.True(t, ok)
	require.EqualValues(t, 50, d)

	// A state change through Put moves the entry between the sets.
	e, _ = tb.Get(2)
	e.State, e.Reason = index.Dead, "x"
	tb.Put(e)
	require.Equal(t, index.Counts{Ready: 2, Dead: 1}, tb.Counts())
	_, ok = tb.NextDeadline()
	require.False(t, ok)

	byID, ok := tb.GetByID("b")
	require.True(t, ok)
	require.Equal(t, index.Dead, byID.State)
	loc, _ := tb.MinLoc()
	require.EqualValues(t, 1, loc)

	_, ok = tb.Delete(2)
	require.True(t, ok)
	_, ok = tb.GetByID("b")
	require.False(t, ok)
	require.EqualValues(t, 20, tb.Bytes())
}

// An Undelivered entry (a never-delivered message copied forward) is
// delivered after every other Ready entry, whatever its Seq, and loses the
// flag once it leaves the Ready state.
func TestTableUndeliveredLast(t *testing.T) {
	tb := index.NewTable()
	tb.Put(index.Entry{Seq: 1, State: index.Ready, Undelivered: true})
	tb.Put(index.Entry{Seq: 2, State: index.Ready, Undelivered: true})
	tb.Put(index.Entry{Seq: 5, State: index.Delayed, Due: 10})
	require.Equal(t, index.Counts{Ready: 2, Delayed: 1}, tb.Counts())
	e, _ := tb.FirstReady()
	require.EqualValues(t, 1, e.Seq, "among the undelivered: by Seq")

	tb.SetNow(10)
	e, _ = tb.FirstReady()
	require.EqualValues(t, 5, e.Seq, "a due message goes before the undelivered")
	require.Equal(t, index.Counts{Ready: 3}, tb.Counts())

	e, _ = tb.Get(1)
	e.State, e.Due, e.Lease = index.Leased, 20, 9
	tb.Put(e)
	got, _ := tb.Get(1)
	require.False(t, got.Undelivered, "a leased entry is delivered")
	got.State, got.Due, got.Lease = index.Ready, 0, 0
	tb.Put(got)
	var order []uint64
	for {
		e, ok := tb.FirstReady()
		if !ok {
			break
		}
		order = append(order, e.Seq)
		tb.Delete(e.Seq)
	}
	require.Equal(t, []uint64{1, 5, 2}, order, "ready again by Seq, then the undelivered")
	require.Equal(t, index.Counts{}, tb.Counts())
}

// What is ready depends on the entries and the time set last only: a
// step back of the time holds back again a due entry, a table rebuilt
// from the same entries answers the same, and a due entry changed or
// deleted leaves every set.
func TestTableSetNowBack(t *testing.T) {
	put := func(tb *index.Table) {
		tb.Put(index.Entry{Seq: 1, State: index.Delayed, Due: 100})
		tb.Put(index.Entry{Seq: 2, State: index.Ready, Undelivered: true})
		tb.Put(index.Entry{Seq: 3, State: index.Delayed, Due: 50})
		tb.Put(index.Entry{Seq: 4, State: index.Ready})
	}
	first := func(tb *index.Table) uint64 {
		e, ok := tb.FirstReady()
		require.True(t, ok)
		return e.Seq
	}
	tb := index.NewTable()
	put(tb)
	for _, c := range []struct {
		now   int64
		first uint64
		c     index.Counts
	}{
		{0, 4, index.Counts{Ready: 2, Delayed: 2}},
		{100, 1, index.Counts{Ready: 4}},
		{99, 3, index.Counts{Ready: 3, Delayed: 1}},
		{-1, 4, index.Counts{Ready: 2, Delayed: 2}},
		{50, 3, index.Counts{Ready: 3, Delayed: 1}},
	} {
		tb.SetNow(c.now)
		again := index.NewTable()
		put(again)
		again.SetNow(c.now)
		require.Equal(t, c.first, first(tb), "at %d", c.now)
		require.Equal(t, c.c, tb.Counts(), "at %d", c.now)
		require.Equal(t, first(again), first(tb), "at %d", c.now)
		require.Equal(t, again.Counts(), tb.Counts(), "at %d", c.now)
		d, ok := tb.NextDue()
		d2, ok2 := again.NextDue()
		require.Equal(t, []any{d2, ok2}, []any{d, ok}, "at %d", c.now)
	}
	tb.SetNow(100)
	e, _ := tb.Get(1)
	e.State, e.Due, e.Lease = index.Leased, 200, 9
	tb.Put(e)
	tb.Delete(3)
	tb.Delete(4)
	require.EqualValues(t, 2, first(tb), "the due entries left ready when changed or deleted")
	require.Equal(t, index.Counts{Ready: 1, Leased: 1}, tb.Counts())
	tb.SetNow(0)
	require.Equal(t, index.Counts{Ready: 1, Leased: 1}, tb.Counts())
}

func TestTableSnapshotIsFrozen(t *testing.T) {
	tb := index.NewTable()
	for i := uint64(1); i <= 100; i++ {
		tb.Put(index.Entry{Seq: i, State: index.Ready})
	}
	snap := tb.Snapshot()
	for i := uint64(1); i <= 50; i++ {
		tb.Delete(i)
	}
	tb.Put(index.Entry{Seq: 500, State: index.Dead})
	require.Equal(t, 100, snap.Len())
	var seqs []uint64
	snap.Ascend(func(e index.Entry) bool { seqs = append(seqs, e.Seq); return true })
	require.Len(t, seqs, 100)
	require.EqualValues(t, 1, seqs[0])
	require.EqualValues(t, 100, seqs[99])
}

func TestDedupWindow(t *testing.T) {
	d := index.NewDedup()
	d.Put(index.DedupItem{ID: "x", Seq: 1})
	d.Put(index.DedupItem{ID: "y", Seq: 2})
	require.True(t, d.Has("x"))
	d.Acked("x", 99, 10, true)
	require.True(t, d.Has("x"), "an ack for another message leaves the id alone")
	require.Equal(t, 0, d.Kept(), "a live id is not kept for the window")
	d.Acked("x", 1, 10, true)
	d.Acked("y", 2, 20, false)
	require.False(t, d.Has("y"), "without a window an acked id is forgotten")
	require.Equal(t, 1, d.Kept(), "only the id acked with a window is kept")
	require.Equal(t, 0, d.Expire(10))
	require.True(t, d.Has("x"))
	require.Equal(t, 1, d.Expire(11))
	require.False(t, d.Has("x"))
	require.Equal(t, 0, d.Len())
	require.Equal(t, 0, d.Kept())
}

// TestTableMinima checks MinLoc, MinEnqueuedAt and BelowLoc against a
// walk of every entry after each of many random puts (moves, state
// changes, clock steps backwards included) and deletes.
func TestTableMinima(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	tb := index.NewTable()
	states := []index.State{index.Ready, index.Delayed, index.Leased, index.Dead}
	for i := 0; i < 5000; i++ {
		seq := uint64(rng.IntN(300) + 1)
		if rng.IntN(4) == 0 {
			tb.Delete(seq)
		} else {
			tb.Put(index.Entry{Seq: seq, Loc: seq + uint64(rng.IntN(1000)), EnqueuedAt: rng.Int64N(500) - 100,
				State: states[rng.IntN(len(states))], Due: rng.Int64N(100)})
		}
		wantLoc, wantAt, locOK, atOK := walkMinima(tb)
		loc, ok := tb.MinLoc()
		require.Equal(t, locOK, ok, "step %d", i)
		require.Equal(t, wantLoc, loc, "MinLoc at step %d", i)
		at, ok := tb.MinEnqueuedAt()
		require.Equal(t, atOK, ok, "step %d", i)
		require.Equal(t, wantAt, at, "MinEnqueuedAt at step %d", i)
	}
	below := uint64(600)
	var got []uint64
	tb.BelowLoc(below, func(e index.Entry) bool { got = append(got, e.Loc); return true })
	var want []uint64
	tb.Ascend(func(e index.Entry) bool {
		if e.Loc < below {
			want = append(want, e.Loc)
		}
		return true
	})
	slices.Sort(want)
	require.Equal(t, want, got)
}

// walkMinima is what MinLoc and MinEnqueuedAt must return, found by
// visiting every entry.
func walkMinima(tb *index.Table) (loc uint64, at int64, locOK, atOK bool) {
	tb.Ascend(func(e index.Entry) bool {
		if !locOK || e.Loc < loc {
			loc, locOK = e.Loc, true
		}
		if e.State != index.Dead && (!atOK || e.EnqueuedAt < at) {
			at, atOK = e.EnqueuedAt, true
		}
		return true
	})
	return loc, at, locOK, atOK
}

// GetByID finds an entry by message id whether the entry was put before
// the first lookup by id (the index is built then) or after it (the index
// is kept), and stops finding it once it is deleted.
func TestTableGetByID(t *testing.T) {
	put := func(tb *index.Table, seq uint64, id string) {
		tb.Put(index.Entry{Seq: seq, Loc: seq, ID: id, State: index.Ready})
	}
	lookup := func(tb *index.Table) { tb.GetByID("probe") }
	for _, tc := range []struct {
		name   string
		steps  func(tb *index.Table)
		want   map[string]uint64 // id -> Seq found
		absent []string
	}{
		{"put before the first lookup", func(tb *index.Table) {
			put(tb, 1, "a")
			put(tb, 2, "b")
		}, map[string]uint64{"a": 1, "b": 2}, nil},
		{"put after the first lookup", func(tb *index.Table) {
			lookup(tb)
			put(tb, 1, "a")
		}, map[string]uint64{"a": 1}, nil},
		{"deleted before the first lookup", func(tb *index.Table) {
			put(tb, 1, "a")
			put(tb, 2, "b")
			tb.Delete(1)
		}, map[string]uint64{"b": 2}, []string{"a"}},
		{"deleted after the first lookup", func(tb *index.Table) {
			put(tb, 1, "a")
			lookup(tb)
			tb.Delete(1)
		}, nil, []string{"a"}},
		{"changed state after the first lookup", func(tb *index.Table) {
			put(tb, 1, "a")
			lookup(tb)
			e, _ := tb.Get(1)
			e.State, e.Due, e.Lease = index.Leased, 10, 5
			tb.Put(e)
		}, map[string]uint64{"a": 1}, nil},
		{"no id", func(tb *index.Table) {
			put(tb, 1, "")
		}, nil, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := index.NewTable()
			tc.steps(tb)
			for id, seq := range tc.want {
				e, ok := tb.GetByID(id)
				require.True(t, ok, id)
				require.Equal(t, seq, e.Seq, id)
			}
			for _, id := range tc.absent {
				_, ok := tb.GetByID(id)
				require.False(t, ok, id)
			}
		})
	}
}

// An entry put Delayed after SetNow is judged by the time set last, as
// one put before it is: a table set to a time and then given an entry
// answers as a table given the entry and then set to that time.
func TestTableSetNowThenPut(t *testing.T) {
	for _, due := range []int64{50, 100, 150} {
		after, before := index.NewTable(), index.NewTable()
		after.SetNow(100)
		after.Put(index.Entry{Seq: 1, State: index.Delayed, Due: due})
		before.Put(index.Entry{Seq: 1, State: index.Delayed, Due: due})
		before.SetNow(100)
		require.Equal(t, before.Counts(), after.Counts(), "due %d", due)
		_, ok := after.FirstReady()
		_, want := before.FirstReady()
		require.Equal(t, want, ok, "due %d", due)
		d, ok := after.NextDue()
		wd, wok := before.NextDue()
		require.Equal(t, []any{wd, wok}, []any{d, ok}, "due %d", due)
	}
}

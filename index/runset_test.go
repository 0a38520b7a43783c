package index

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/google/btree"
	"github.com/stretchr/testify/require"
)

// TestRunSetModel checks runSet against a btree holding the same keys,
// through random inserts (mostly in increasing order, some behind, some
// of keys deleted before or still present), deletes (mostly oldest first, some anywhere,
// some of absent keys), and a full comparison of Len, Min and the order
// after each step, whole and cut short. WALQ_RUNSET_STEPS sets the number
// of steps (default 5,000); the seed is printed for a replay.
func TestRunSetModel(t *testing.T) {
	steps := 5_000
	if s := os.Getenv("WALQ_RUNSET_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		steps = n
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	s := newRunSet(lessTimeKey)
	model := btree.NewG(degree, lessTimeKey)
	var keys []timeKey // every key inserted, to delete or reinsert
	at, seq := int64(0), uint64(0)
	newKey := func() timeKey {
		seq++
		switch rng.IntN(10) {
		case 0:
			return timeKey{at - rng.Int64N(1000), seq} // behind the run's last
		case 1:
			return timeKey{at, seq} // a tie on time
		}
		at += rng.Int64N(100)
		return timeKey{at, seq}
	}
	for step := range steps {
		switch op := rng.IntN(20); {
		case op < 9:
			k := newKey()
			s.Insert(k)
			model.ReplaceOrInsert(k)
			keys = append(keys, k)
		case op < 10 && len(keys) > 0:
			k := keys[rng.IntN(len(keys))]
			s.Insert(k) // a key deleted before comes back; a present one stays once
			model.ReplaceOrInsert(k)
		case op < 17:
			if m, ok := model.Min(); ok && rng.IntN(4) > 0 {
				require.True(t, s.Delete(m), "step %d: delete min %v", step, m)
				model.Delete(m)
			}
		case len(keys) > 0:
			k := keys[rng.IntN(len(keys))]
			_, had := model.Delete(k)
			require.Equal(t, had, s.Delete(k), "step %d: delete %v", step, k)
		}
		checkRunSet(t, step, s, model, rng)
	}
}

// TestRunSetInsertPresentInRest: a key that went to rest, behind the run,
// and is inserted again once the run's end was dropped below it stays
// once; it was appended to the run too, counted twice, and a Delete left
// it present.
func TestRunSetInsertPresentInRest(t *testing.T) {
	s := newRunSet(lessTimeKey)
	s.Insert(timeKey{10, 1})
	s.Insert(timeKey{5, 2})                   // behind the run's last: rest
	require.True(t, s.Delete(timeKey{10, 1})) // the run is empty now
	s.Insert(timeKey{5, 2})
	require.Equal(t, 1, s.Len())
	s.Insert(timeKey{20, 3})
	s.Insert(timeKey{5, 2})
	require.Equal(t, 2, s.Len())
	require.True(t, s.Delete(timeKey{5, 2}))
	require.False(t, s.Delete(timeKey{5, 2}), "deleted once, still present")
	m, ok := s.Min()
	require.True(t, ok)
	require.Equal(t, timeKey{20, 3}, m)
}

// TestRunSetBurst checks that a long run emptied all but one stuck key,
// then refilled, keeps its order and gives back its array.
func TestRunSetBurst(t *testing.T) {
	s := newRunSet(lessLocKey)
	for i := range uint64(100_000) {
		s.Insert(locKey{i + 1, i + 1})
	}
	for i := range uint64(99_999) {
		require.True(t, s.Delete(locKey{i + 2, i + 2}))
	}
	require.Equal(t, 1, s.Len())
	require.LessOrEqual(t, cap(s.buf), 2*runKeepCap, "the array shrank with the run")
	m, ok := s.Min()
	require.True(t, ok)
	require.Equal(t, locKey{1, 1}, m)
	require.True(t, s.Delete(m))
	require.False(t, s.Delete(m))
	require.Equal(t, 0, s.Len())
	_, ok = s.Min()
	require.False(t, ok)
}

func checkRunSet(t *testing.T, step int, s *runSet[timeKey], model *btree.BTreeG[timeKey], rng *rand.Rand) {
	t.Helper()
	require.Equal(t, model.Len(), s.Len(), "step %d: Len", step)
	wm, wok := model.Min()
	gm, gok := s.Min()
	require.Equal(t, wok, gok, "step %d: Min found", step)
	require.Equal(t, wm, gm, "step %d: Min", step)
	limit := rng.IntN(model.Len() + 2)
	var want, got []timeKey
	model.Ascend(func(k timeKey) bool { want = append(want, k); return len(want) < limit })
	s.Ascend(func(k timeKey) bool { got = append(got, k); return len(got) < limit })
	require.Equal(t, want, got, "step %d: Ascend cut at %d", step, limit)
	pivot := timeKey{rng.Int64N(max(1, wm.at+1000) + 1), rng.Uint64N(uint64(step) + 2)}
	want, got = want[:0], got[:0]
	model.AscendLessThan(pivot, func(k timeKey) bool { want = append(want, k); return true })
	s.AscendLessThan(pivot, func(k timeKey) bool { got = append(got, k); return true })
	require.Equal(t, want, got, "step %d: AscendLessThan %v", step, pivot)
}

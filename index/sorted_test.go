package index_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
)

// pendingOf lists the pending values of a snapshot in its order.
func pendingOf(snap *index.SortedSnapshot) []index.SortedValue {
	var out []index.SortedValue
	snap.Pending(func(v index.SortedValue) bool { out = append(out, v); return true })
	return out
}

// modelOrder sorts values the way a snapshot lists them.
func modelOrder(vs []index.SortedValue) []index.SortedValue {
	if len(vs) == 0 {
		return nil
	}
	vs = slices.Clone(vs)
	slices.SortFunc(vs, func(a, b index.SortedValue) int {
		if a.Key != b.Key {
			if a.Key < b.Key {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(a.Sort, b.Sort); c != 0 {
			return c
		}
		return int(a.Seq) - int(b.Seq)
	})
	return vs
}

// TestSortedAgainstModel drives a Sorted index with random publishes (in
// and out of order, enough per key to split chunks), pulls, acks, returns,
// drops and moves, and compares it after every step with a plain list:
// pending values in order, the pull order's head, Bytes and MinLoc.
// Snapshots taken on the way must not change afterwards. With many keys
// the pull order spans several runs, and the key pulled must be the one
// with the smallest sort key (then name) and the order hold every key.
// With -race, a third of the steps (test.sh's step plain runs them all).
func TestSortedAgainstModel(t *testing.T) {
	for _, keys := range []int{4, 400} {
		t.Run(fmt.Sprint("keys=", keys), func(t *testing.T) { testSortedAgainstModel(t, keys) })
	}
}

func testSortedAgainstModel(t *testing.T, keys int) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := index.NewSorted(false)
	var model []index.SortedValue // pending values
	type frozen struct {
		snap *index.SortedSnapshot
		want []index.SortedValue
	}
	var snaps []frozen
	seq := uint64(0)
	steps := 4000
	if raceEnabled { // every kind of step still runs, in a third as many
		steps = 1300
	}
	for step := range steps {
		switch op := rng.IntN(20); {
		case op < 14: // publish
			seq++
			v := index.SortedValue{Key: fmt.Sprint("k", rng.IntN(keys)), Sort: []byte{byte(rng.IntN(256)), byte(rng.IntN(256))},
				Seq: seq, Loc: seq, Size: uint32(rng.IntN(100) + 1)}
			s.Publish(v)
			model = append(model, v)
		case op < 16 && step > 1500: // pull the first key (after a build-up that splits chunks), then ack or return
			key, sort, ok := s.Next()
			if !ok {
				continue
			}
			first := model[0]
			for _, v := range model {
				if c := bytes.Compare(v.Sort, first.Sort); c < 0 || c == 0 && v.Key < first.Key {
					first = v
				}
			}
			require.Equal(t, first.Key, key, "step %d: pull order", step)
			require.Equal(t, first.Sort, sort, "step %d: pull order", step)
			b := s.Take(key, 1<<40+uint64(step), 0, 1)
			model = slices.DeleteFunc(model, func(v index.SortedValue) bool { return v.Key == key })
			if rng.IntN(2) == 0 {
				_, ok = s.Ack(b.Lease)
			} else {
				_, ok = s.Return(b.Lease, 0, func(index.SortedValue) bool { return false }, "")
				model = append(model, b.Values...) // with the delivery Take counted
			}
			require.True(t, ok)
		case op < 17 && len(model) > 0: // drop one
			i := rng.IntN(len(model))
			require.True(t, s.Drop(model[i]))
			model = slices.Delete(model, i, i+1)
		case op < 18 && len(model) > 0: // move one
			i := rng.IntN(len(model))
			seq++
			require.True(t, s.MoveValue(model[i], seq, model[i].Size+1))
			model[i].Loc, model[i].Size = seq, model[i].Size+1
		case op < 19:
			snaps = append(snaps, frozen{s.Snapshot(), modelOrder(model)})
		}
		checkSorted(t, s, model, step)
	}
	for i, f := range snaps {
		require.Equal(t, len(f.want), func() int { n, _, _, _ := f.snap.Len(); return n }(), "snapshot %d", i)
		require.Equal(t, f.want, pendingOf(f.snap), "snapshot %d changed after it was taken", i)
	}
}

func checkSorted(t *testing.T, s *index.Sorted, model []index.SortedValue, step int) {
	t.Helper()
	var bytes int64
	minLoc := uint64(1 << 63)
	for _, v := range model {
		bytes += int64(v.Size)
		minLoc = min(minLoc, v.Loc)
	}
	require.Equal(t, bytes, s.Bytes(), "step %d", step)
	require.Equal(t, len(model), s.Counts().Pending, "step %d", step)
	names := map[string]bool{}
	for _, v := range model {
		names[v.Key] = true
	}
	require.Equal(t, len(names), s.Counts().Keys, "step %d: keys in the pull order", step)
	loc, ok := s.MinLoc()
	require.Equal(t, len(model) > 0, ok, "step %d", step)
	if ok {
		require.Equal(t, minLoc, loc, "step %d: MinLoc", step)
	}
	if step%97 == 0 {
		require.Equal(t, modelOrder(model), pendingOf(s.Snapshot()), "step %d", step)
	}
}

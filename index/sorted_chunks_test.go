package index

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// chunkItems lists a chunkSet's items run by run, and checks that no run
// in the tree is empty or over runMax.
func chunkItems(t *testing.T, s *chunkSet[int]) []int {
	t.Helper()
	var out []int
	s.tree.Ascend(func(r *run[int]) bool {
		if len(r.items) == 0 || len(r.items) > runMax {
			t.Fatalf("run of %d items", len(r.items))
		}
		out = append(out, r.items...)
		return true
	})
	return out
}

// TestChunkSetAgainstModel drives a chunkSet and a sorted slice with the
// same adds and deletes, in patterns that fill runs (ascending), split
// them (random, descending) and empty them (deletes from the front, at
// random), and compares items, Len, Min and Get after every step.
func TestChunkSetAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	const n = 3000
	patterns := []struct {
		name string
		add  func(i int) int // the i-th item to add
		del  func(model []int) int
	}{
		{"ascending, delete first", func(i int) int { return i }, func(m []int) int { return m[0] }},
		{"descending, delete last", func(i int) int { return n - i }, func(m []int) int { return m[len(m)-1] }},
		{"random, delete random", func(int) int { return rng.IntN(4 * n) }, func(m []int) int { return m[rng.IntN(len(m))] }},
		{"ascending, delete random", func(i int) int { return i }, func(m []int) int { return m[rng.IntN(len(m))] }},
	}
	for _, p := range patterns {
		t.Run(p.name, func(t *testing.T) {
			s := newChunkSet(cmp.Compare[int])
			var model []int
			check := func(step int) {
				t.Helper()
				if got := chunkItems(t, s); !slices.Equal(got, model) {
					t.Fatalf("step %d: items %v, want %v", step, got, model)
				}
				if s.Len() != len(model) {
					t.Fatalf("step %d: Len %d, want %d", step, s.Len(), len(model))
				}
				m, ok := s.Min()
				if ok != (len(model) > 0) || ok && m != model[0] {
					t.Fatalf("step %d: Min %d %v, want %v", step, m, ok, model)
				}
			}
			for step := range 3 * n {
				if step%3 == 2 && len(model) > 0 || step >= 2*n && len(model) > 0 {
					v := p.del(model)
					if !s.Delete(v) {
						t.Fatalf("step %d: Delete(%d) found nothing", step, v)
					}
					i, _ := slices.BinarySearch(model, v)
					model = slices.Delete(model, i, i+1)
					if s.Delete(v) || s.Get(v) != nil {
						t.Fatalf("step %d: %d still there after its Delete", step, v)
					}
				} else {
					v := p.add(step)
					s.ReplaceOrInsert(v)
					if i, found := slices.BinarySearch(model, v); !found {
						model = slices.Insert(model, i, v)
					}
					if got := s.Get(v); got == nil || *got != v {
						t.Fatalf("step %d: Get(%d) = %v after adding it", step, v, got)
					}
				}
				check(step)

			}
		})
	}
}

// TestChunkSetRunsStayFull deletes at random most of a set built by
// ascending adds: short neighbouring runs must merge, so that runs keep
// holding an eighth of runMax on average.
func TestChunkSetRunsStayFull(t *testing.T) {
	s := newChunkSet(cmp.Compare[int])
	items := make([]int, 64*runMax)
	for i := range items {
		items[i] = i
		s.ReplaceOrInsert(i)
	}
	rand.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	for i, v := range items[:len(items)-2*runMax] {
		if !s.Delete(v) {
			t.Fatalf("Delete(%d) found nothing", v)
		}
		if left := len(items) - i - 1; left < s.tree.Len()*runMax/8 {
			t.Fatalf("%d items left in %d runs", left, s.tree.Len())
		}
	}
}

// TestLocSetAgainstModel adds and removes Locs near each other and far
// apart (so that bitmap words fill, share and empty) and checks min
// against a plain set after every step.
func TestLocSetAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, spread := range []uint64{64, 1000, 1 << 40} {
		t.Run(fmt.Sprint("spread=", spread), func(t *testing.T) {
			s, model := newLocSet(), map[uint64]bool{}
			for step := range 5000 {
				loc := rng.Uint64N(spread)
				if rng.IntN(2) == 0 {
					s.add(loc)
					model[loc] = true
				} else {
					s.remove(loc)
					delete(model, loc)
				}
				got, ok := s.min()
				want, wantOK := uint64(0), false
				for l := range model {
					if !wantOK || l < want {
						want, wantOK = l, true
					}
				}
				if got != want || ok != wantOK {
					t.Fatalf("step %d: min %d %v, want %d %v", step, got, ok, want, wantOK)
				}
			}
		})
	}
}

package main

import (
	"slices"
	"testing"
)

func TestRoundOrder(t *testing.T) {
	const n, rounds = 5, 20
	a, b := newRoundOrder(42), newRoundOrder(42)
	firsts := make(map[int]bool)
	for r := range rounds {
		pa, pb := a.next(n), b.next(n)
		if !slices.Equal(pa, pb) {
			t.Fatalf("round %d: seed 42 gave %v and %v", r, pa, pb)
		}
		sorted := slices.Sorted(slices.Values(pa))
		if !slices.Equal(sorted, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("round %d: %v is not a permutation of 0..4", r, pa)
		}
		firsts[pa[0]] = true
	}
	if len(firsts) < 2 {
		t.Errorf("the same system ran first in all %d rounds", rounds)
	}
	var none *roundOrder
	if got := none.next(3); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("nil order gave %v, want 0 1 2", got)
	}
}

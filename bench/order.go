package main

import "math/rand/v2"

// roundOrder draws the order in which the systems of a cell run in each
// round. Every round gets a fresh permutation, so that no system always
// runs first in a cell (on a cold cache) or right after the same
// neighbour; the seed is printed with the results, so that a run's order
// can be replayed with -seed.
type roundOrder struct {
	rng *rand.Rand // owned by the goroutine running the cells, one at a time
}

func newRoundOrder(seed uint64) *roundOrder {
	return &roundOrder{rng: rand.New(rand.NewPCG(seed, seed>>32|1))}
}

// next returns a permutation of 0..n-1.
func (o *roundOrder) next(n int) []int {
	if o == nil {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return o.rng.Perm(n)
}

package index

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeySetAgainstMap drives a keySet and a map with the same random
// puts and removals over a small name space, so that probe runs collide,
// wrap around the table and are shifted back by removals; after every
// step each name is looked up in both. With -race, a third of the steps
// (test.sh's step plain runs them all).
func TestKeySetAgainstMap(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, names := range []int{5, 40, 300} {
		t.Run(fmt.Sprintf("names=%d", names), func(t *testing.T) {
			set, model := newKeySet(), map[string]*keyValues{}
			steps := 20 * names
			if raceEnabled { // collisions, wraps and shifts still happen, in a third as many steps
				steps = 7 * names
			}
			for step := range steps {
				name := fmt.Sprint("k", rng.IntN(names))
				if model[name] == nil && rng.IntN(3) > 0 {
					k := &keyValues{name: name}
					set.put(k)
					model[name] = k
				} else {
					k := model[name]
					if k == nil {
						k = &keyValues{name: name} // not in the set: remove finds nothing
					}
					set.remove(k)
					delete(model, name)
				}
				for i := range names {
					n := fmt.Sprint("k", i)
					if got := set.get(n); got != model[n] {
						t.Fatalf("step %d: get(%q) = %p, want %p", step, n, got, model[n])
					}
				}
				seen := 0
				set.each(func(k *keyValues) bool { seen++; return model[k.name] == k })
				if seen != len(model) || set.n != len(model) {
					t.Fatalf("step %d: each saw %d keys, n = %d, want %d", step, seen, set.n, len(model))
				}
			}
		})
	}
}

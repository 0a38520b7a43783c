package fuzz_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
)

// checkCrashPoints runs check for each crash point 1..npoints (only the
// point named by only, when only is not 0) on as many workers as there are CPUs,
// each with a scratch folder of its own under base, and adds up what they
// return into s. It hands out no further point after the first failure,
// and returns the sum and that failure.
func checkCrashPoints[S interface{ add(S) S }](base string, npoints, only int, s S,
	check func(scratch string, n int) (S, error)) (S, error) {
	points := make(chan int)
	var mu sync.Mutex
	var failure error
	var wg sync.WaitGroup
	for w := range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range points {
				ps, err := check(filepath.Join(base, fmt.Sprint(w)), n)
				mu.Lock()
				s = s.add(ps)
				if err != nil && failure == nil {
					failure = err
				}
				mu.Unlock()
			}
		}()
	}
	for n := 1; n <= npoints; n++ {
		if only != 0 && n != only {
			continue
		}
		mu.Lock()
		stop := failure != nil
		mu.Unlock()
		if stop {
			break
		}
		points <- n
	}
	close(points)
	wg.Wait()
	return s, failure
}

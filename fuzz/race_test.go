//go:build race

package fuzz_test

// raceEnabled scales the suite's loops down under the race detector, which
// makes every operation several times slower.
const raceEnabled = true

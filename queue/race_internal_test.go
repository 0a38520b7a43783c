//go:build race

package queue

// raceEnabled scales long tests down under the race detector, which makes
// every operation several times slower; the plain run of test.sh (step
// plain) runs them at full size.
const raceEnabled = true

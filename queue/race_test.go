//go:build race

package queue_test

// raceEnabled scales long model tests down under the race detector, which
// makes every operation several times slower; the plain run of test.sh
// (step plain) runs them at full size.
const raceEnabled = true

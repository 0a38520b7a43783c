//go:build race

package queue_test

// raceEnabled scales long model tests down under the race detector, which
// makes every operation several times slower.
const raceEnabled = true

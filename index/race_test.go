//go:build race

package index

// raceEnabled scales long model tests down under the race detector, which
// makes every operation several times slower.
const raceEnabled = true

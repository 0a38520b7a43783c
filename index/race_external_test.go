//go:build race

package index_test

// raceEnabled scales long model tests down under the race detector, which
// makes every operation several times slower; test.sh's step plain runs
// each test scaled by it at full size without the detector, and names
// every one.
const raceEnabled = true

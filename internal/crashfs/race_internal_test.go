//go:build race

package crashfs

// raceEnabled scales long tests down under the race detector, which makes
// every operation slower; test.sh's step plain runs each test scaled by
// it at full size without the detector, and names every one.
const raceEnabled = true

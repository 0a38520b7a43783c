//go:build race

package wal_test

// raceEnabled scales the power-loss tests' crash states and the salvage
// sweeps' bit flips and cuts down under the race detector, which makes
// every operation slower; test.sh's step plain runs each test scaled by
// it at full size without the detector, and names every one.
const raceEnabled = true

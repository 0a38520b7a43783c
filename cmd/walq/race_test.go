//go:build race

package main_test

// raceEnabled builds the walq binary with the race detector too.
const raceEnabled = true

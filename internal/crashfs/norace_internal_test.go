//go:build !race

package crashfs

const raceEnabled = false

package crashfs

import (
	"os"
	"path/filepath"
	"strings"
)

// MayRefuse reports whether a reader of walq's log may refuse this state,
// materialized under root, with ErrCorrupt for a hole it holds: bytes
// written after lost ones kept (Holes), unless every hole is one a lost
// overwrite of the zeros ahead of a tail leaves (OverZeros), a torn write
// the log must cut. Such a hole may still be refused where the holed file
// is a log segment (a name of 20 digits) that another segment follows in
// its directory: a sealed segment under a torn roll, where valid entries
// after damage make it ErrCorrupt (wal/tornroll.go).
func (s State) MayRefuse(root string) bool {
	if !s.Holes {
		return false
	}
	if !s.OverZeros {
		return true
	}
	for _, h := range s.Holed {
		if isSegment(filepath.Base(h)) && followed(filepath.Join(root, filepath.Dir(h)), filepath.Base(h)) {
			return true
		}
	}
	return false
}

// followed reports whether dir holds a segment named after name.
func followed(dir, name string) bool {
	des, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, de := range des {
		if isSegment(de.Name()) && de.Name() > name {
			return true
		}
	}
	return false
}

// isSegment reports whether name is a log segment's: 20 digits.
func isSegment(name string) bool {
	return len(name) == 20 && strings.Trim(name, "0123456789") == ""
}

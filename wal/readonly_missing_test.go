package wal_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestReadOnlyMissingDir: a read-only Open of a log directory that does not
// exist (a queue whose first Open crashed before it made its log) says so
// at once; it is no listing a writer tore, to be retried and reported as
// one.
func TestReadOnlyMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	for _, salvage := range []bool{false, true} {
		_, err := wal.Open(dir, &wal.Options{ReadOnly: true, Salvage: salvage})
		if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "changed under a writer") {
			t.Errorf("read-only Open (Salvage %v) of a missing directory: %v; want fs.ErrNotExist, not a torn listing", salvage, err)
		}
	}
}

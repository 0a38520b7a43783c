package fuzz_test

import (
	"path/filepath"
	"testing"
	"time"
)

// Regression tests for bugs the suite found in code outside fuzz/ that
// need the suite's own machinery (a child process) to show. A regression
// test that needs no more than its package lives in that package: see the
// table in README.md.

// TestSnapshotTmpRemovedOnFailure: a snapshot whose write or fsync fails
// leaves its temporary file, snapshot-<LSN>.snap.tmp, behind
// (recovery/write.go, writeSynced returns without removing it). The next
// successful snapshot removes them, but while the disk stays full or over
// quota every attempt (the housekeeper retries as the log grows) leaves one
// more, each as large as the disk allowed: they pile up and take the space
// a recovery would need.
func TestSnapshotTmpRemovedOnFailure(t *testing.T) {
	rng, _ := testRand(t)
	cfg := childConfig{Mode: "ioerror", Dir: t.TempDir(), Seed: rng.Uint64(), Limit: 12 << 10, Segment: 4096, Lifetime: time.Minute}
	c := startChild(t, "TestIOErrors", cfg)
	for range c.lines {
	}
	<-c.done
	if tmps, _ := filepath.Glob(filepath.Join(cfg.Dir, "*.snap.tmp")); len(tmps) > 0 {
		t.Fatalf("%d temporary snapshot files left behind: %v", len(tmps), tmps)
	}
}

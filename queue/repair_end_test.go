package queue_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestRepairForeignEndFile: a tidwall/wal truncation marker (NAME.END),
// which walq never writes, makes Open refuse the queue. Finishing the
// truncation it marks, as tidwall/wal would, removes the segments after it
// and acknowledged messages with them, so no tool changes it: Open must
// not advise a repair or a salvage, Verify must call the directory
// corrupt, Repair must refuse it before anything changes rather than call
// it clean, and once the file is moved out every message is there. A
// START file that holds no valid entry (an older walq's truncation copied
// the kept segment's entries into one) is no truncation of walq's either,
// and finishing it would replace the segment with nothing.
func TestRepairForeignEndFile(t *testing.T) {
	for _, suffix := range []string{".END", ".START"} {
		t.Run(suffix, func(t *testing.T) { foreignFile(t, suffix) })
	}
}

// foreignFile runs TestRepairForeignEndFile with an empty file named after
// the first segment plus suffix.
func foreignFile(t *testing.T, suffix string) {
	dir := t.TempDir()
	q, err := queue.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := q.Enqueue(context.Background(), []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	end := logSegments(t, dir)[0] + suffix
	if err := os.WriteFile(end, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantAdvice := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrCorrupt) || !errors.Is(err, wal.ErrForeign) {
			t.Fatalf("%s with a foreign END file: %v, want ErrCorrupt and wal.ErrForeign", what, err)
		}
		if !strings.Contains(err.Error(), end) || !strings.Contains(err.Error(), "move it out of the log directory") {
			t.Errorf("%s: %v\nwant the END file named and the advice to move it out", what, err)
		}
		if strings.Contains(err.Error(), "run 'walq repair") || strings.Contains(err.Error(), "open with Options.Salvage") {
			t.Errorf("%s: %v\nadvises a tool that does not change the END file", what, err)
		}
	}
	_, err = queue.Open(dir, nil)
	wantAdvice("Open", err)
	_, err = queue.Open(dir, &queue.Options{Salvage: true})
	wantAdvice("salvaging Open", err)
	c, err := queue.Verify(dir, nil)
	wantAdvice("Verify", err)
	if c.Clean() {
		t.Errorf("Verify: %+v is clean, but Open refuses the directory", c)
	}
	backedUp := false
	rep, err := queue.Repair(dir, &queue.RepairOptions{Backup: func() error { backedUp = true; return nil }})
	wantAdvice("Repair", err)
	if rep.Repaired || backedUp {
		t.Errorf("Repair: repaired %v, backup called %v: want the directory refused before anything changes", rep.Repaired, backedUp)
	}
	if _, err := os.Stat(end); err != nil {
		t.Fatalf("the END file after Repair: %v", err)
	}
	if err := os.Remove(end); err != nil {
		t.Fatal(err)
	}
	q, err = queue.Open(dir, nil)
	if err != nil {
		t.Fatalf("Open once the END file is moved out: %v", err)
	}
	defer q.Close()
	if n := q.Stats().Ready; n != 3 {
		t.Errorf("%d messages ready once the END file is moved out, want 3", n)
	}
}

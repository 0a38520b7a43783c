package main_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// logFiles returns the segment files of the queue in dir, in order.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "log", "[0-9]*"))
	require.NoError(t, err)
	return files
}

// logBytes returns the bytes the queue's segment files hold.
func logBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, f := range logFiles(t, dir) {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		n += fi.Size()
	}
	return n
}

// witnesses counts the entries of no record (Count 0) in the queue's log.
func witnesses(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, f := range logFiles(t, dir) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for off := 0; off < len(b); {
			size, k := binary.Uvarint(b[off:])
			require.Positive(t, k)
			if binary.LittleEndian.Uint32(b[off+k+13:]) == 0 {
				n++
			}
			off += k + int(size)
		}
	}
	return n
}

// TestInspectWitnesses: a log that stayed idle after its fsyncs holds
// witnesses (entries of no record); dump lists every record, LSNs
// following on, and verify finds the log clean.
func TestInspectWitnesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	for i := range 5 {
		before := logBytes(t, dir)
		_, err := q.Enqueue(context.Background(), []byte(fmt.Sprintf("payload %d", i)), queue.WithID(fmt.Sprintf("msg-%d", i)))
		require.NoError(t, err)
		after := logBytes(t, dir)
		for deadline := time.Now().Add(10 * time.Second); logBytes(t, dir) == after && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // the witness comes once the log stays idle after the fsync
		}
		require.Greater(t, after, before)
	}
	require.NoError(t, q.Close())
	require.Positive(t, witnesses(t, dir))

	r := mustWalq(t, 0, "", "verify", dir)
	require.Contains(t, r.stdout, "result: clean")
	lines := jsonLines[dumpLine](t, mustWalq(t, 0, "", "dump", dir).stdout)
	enqueued := 0
	for i, l := range lines {
		if l.Op == "enqueue" {
			require.Equal(t, fmt.Sprintf("msg-%d", enqueued), l.ID)
			enqueued++
		}
		if i > 0 {
			require.Equal(t, lines[i-1].LSN+1, l.LSN, "LSNs follow on")
		}
	}
	require.Equal(t, 5, enqueued)
}

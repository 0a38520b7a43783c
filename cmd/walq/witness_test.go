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

// frames returns the end offset and the Count of each whole entry of a
// segment file.
func frames(t *testing.T, file string) (ends []int64, counts []uint32) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	for off := 0; off < len(b); {
		size, k := binary.Uvarint(b[off:])
		if k <= 0 || off+k+int(size) > len(b) || size < 17 {
			break
		}
		off += k + int(size)
		ends, counts = append(ends, int64(off)), append(counts, binary.LittleEndian.Uint32(b[off-int(size)+13:]))
	}
	return ends, counts
}

// lastRecordEnd returns the offset just after the last entry of file
// that holds records: a witness may follow it.
func lastRecordEnd(t *testing.T, file string) int64 {
	t.Helper()
	ends, counts := frames(t, file)
	for i := len(ends) - 1; i >= 0; i-- {
		if counts[i] > 0 {
			return ends[i]
		}
	}
	t.Fatalf("%s holds no entry with records", file)
	return 0
}

// settle waits for the witness an open queue's log writes once it stays
// idle after its last fsync (wal/witness.go), into the empty tail a roll
// left too, so that the directory changes no more while the test looks at
// it. The caller has just written a record, so one is due: the test fails
// if none comes within 10 seconds.
func settle(t *testing.T, dir string) {
	t.Helper()
	const limit = 10 * time.Second
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		files := logFiles(t, dir)
		if _, counts := frames(t, files[len(files)-1]); len(counts) > 0 && counts[len(counts)-1] == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no witness at the end of %s after %v: the log did not settle", files[len(files)-1], limit)
		}
	}
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
	o := fixtureOptions()
	o.AppendOnly = true // the log's files grow by each entry, not by zeros written ahead of them
	q, err := queue.Open(dir, o)
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

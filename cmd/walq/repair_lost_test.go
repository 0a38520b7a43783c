package main_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRepairLostLinesOfATornTail: repair prints each lost LSN once and a
// range whose end is unknown in words. A tail torn under a snapshot that
// needs it is two damaged regions with the same LSN (the cut entry, and a
// log that ends too soon): one "lost LSNs" line. A crashed queue whose
// last entry lost its header has a torn tail whose last LSN is unknown.
func TestRepairLostLinesOfATornTail(t *testing.T) {
	tear := func(t *testing.T, dir string, n int64) { // n bytes off the last entry of records (a witness may follow it)
		t.Helper()
		last := segments(t, dir)[len(segments(t, dir))-1]
		require.NoError(t, os.Truncate(last, lastRecordEnd(t, last)-n))
	}
	lostLines := regexp.MustCompile(`(?m)^lost LSNs: .*$`)

	dir := cleanQueue(t, 20)
	tear(t, dir, 5)
	r := mustWalq(t, 0, "", "repair", dir)
	require.Regexp(t, `(?m)^skipped: .*, 1 entry, LSN \d+ `, r.stdout)
	require.Len(t, lostLines.FindAllString(r.stdout, -1), 1, r.stdout)
	require.Regexp(t, `(?m)^lost LSNs: \d+$`, r.stdout)

	dir = crashedQueue(t, 40)
	tear(t, dir, 60)
	r = mustWalq(t, 0, "", "repair", dir)
	require.Equal(t, []string{"lost LSNs: from 42 (the last one is unknown)"}, lostLines.FindAllString(r.stdout, -1), r.stdout)
	require.Regexp(t, `(?m)^replayed 41 records after snapshot LSN 0; 1 lease ready again$`, r.stdout)
}

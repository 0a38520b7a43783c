package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestRepairNamesDropped: repair names a dropped entry as its queue does:
// an ack queue's message by its id, a sorted or windowed queue's value by
// its key.
func TestRepairNamesDropped(t *testing.T) {
	payload := []byte(strings.Repeat("x", 300))
	ctx := context.Background()
	cases := []struct {
		name string
		fill func(t *testing.T, dir string) // leaves 40 entries whose records the snapshot keeps in the log
		line string                         // what each dropped entry's line must match
	}{
		{"ack", func(t *testing.T, dir string) {
			q, err := queue.Open(dir, fixtureOptions())
			require.NoError(t, err)
			for i := range 40 { // delayed: the snapshot holds them, their records stay in the log
				_, err := q.Enqueue(ctx, payload, queue.WithID(fmt.Sprintf("msg-%03d", i)), queue.WithDelay(time.Hour))
				require.NoError(t, err)
			}
			require.NoError(t, q.Compact())
			require.NoError(t, q.Close())
		}, `dropped message: seq \d+ id "msg-\d{3}"`},
		{"sorted", func(t *testing.T, dir string) {
			s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: *fixtureOptions()})
			require.NoError(t, err)
			for i := range 40 {
				require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprintf("key-%03d", i), payload))
			}
			require.NoError(t, s.Compact())
			require.NoError(t, s.Close())
		}, `dropped value: seq \d+ key "key-\d{3}"`},
		{"windowed", func(t *testing.T, dir string) {
			w, err := queue.OpenWindowed(dir, &queue.WindowOptions{
				SortedOptions: queue.SortedOptions{Options: *fixtureOptions()}, Window: time.Hour})
			require.NoError(t, err)
			for i := range 40 {
				require.NoError(t, w.Publish(ctx, fmt.Sprintf("key-%03d", i), payload))
			}
			require.NoError(t, w.Compact())
			require.NoError(t, w.Close())
		}, `dropped value: seq \d+ key "key-\d{3}"`},
	}
	dropped := regexp.MustCompile(`(?m)^dropped.*$`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			c.fill(t, dir)
			segs := segments(t, dir)
			require.Greater(t, len(segs), 1)
			b, err := os.ReadFile(segs[0])
			require.NoError(t, err)
			b[len(b)/2] ^= 0x10
			require.NoError(t, os.WriteFile(segs[0], b, 0o600))

			r := mustWalq(t, 0, "", "repair", dir)
			lines := dropped.FindAllString(r.stdout, -1)
			require.NotEmpty(t, lines, r.stdout)
			for _, l := range lines {
				require.Regexp(t, "^"+c.line+"$", l)
			}
		})
	}
}

package queue

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// Damage in a never-delivered message: every compaction retried copies
// nothing again. The delayed messages and the never-delivered ones below
// the damaged record are copied once at most; nothing above it is.
func TestCompactionStopsAtCursorDamage(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	o := &Options{SegmentSize: 4096, Clock: clock}
	q, err := Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	for range 40 {
		_, err := q.Enqueue(ctx, []byte("delayed|"+strings.Repeat("d", 350)), WithDelay(100*time.Hour))
		require.NoError(t, err)
	}
	for i := range 25 {
		p := "never|" + strings.Repeat("n", 350)
		if i == 12 {
			p = "DAMAGED|" + strings.Repeat("n", 350)
		}
		_, err = q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	flipped := false
	for _, s := range segs[:len(segs)-1] {
		if b, err := os.ReadFile(s); err == nil && strings.Contains(string(b), "DAMAGED|") {
			flipMark(t, s, "DAMAGED|")
			flipped = true
		}
	}
	require.True(t, flipped)
	o.manualCompact = true
	q, err = Open(dir, o)
	require.NoError(t, err)
	defer q.Close()
	for range 300 {
		_, err := q.Enqueue(ctx, []byte(strings.Repeat("p", 400)), WithDelay(time.Millisecond))
		require.NoError(t, err)
		clock.Advance(time.Second)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		if err := q.Compact(); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
	}
	require.ErrorIs(t, q.Compact(), ErrCorrupt)
	t.Logf("moved %d, log %d bytes", q.Stats().Moved, q.log.Size())
	require.LessOrEqual(t, q.Stats().Moved, uint64(40+12), "messages copied forward again and again")
}

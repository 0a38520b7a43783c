package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// A read-only salvaging open (the preview) shows what Repair then drops:
// an index entry that names another message's record is in the preview's
// Recovery.Dropped and gone from its counts, exactly as after the repair,
// and the preview writes nothing.
func TestSalvagePreviewDropsMisplacedEntry(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	o := &Options{SegmentSize: 4096, Clock: clock, manualCompact: true}
	q, err := Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"A", "B", "C"} {
		_, err := q.Enqueue(ctx, []byte("payload of "+id), WithDelay(time.Hour), WithID(id))
		require.NoError(t, err)
	}
	a, _ := misplaceFirst(q)
	require.NoError(t, q.Close()) // its snapshot holds the misplaced entry

	preview := func() (Recovery, Stats) {
		t.Helper()
		p, err := Open(dir, &Options{ReadOnly: true, Salvage: true, Clock: clock})
		require.NoError(t, err)
		defer p.Close()
		return p.Recovery(), p.Stats()
	}
	shown, shownStats := preview()
	again, _ := preview() // the first preview wrote nothing
	require.Equal(t, shown.Dropped, again.Dropped)

	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []Lost{{Seq: a.Seq, ID: "A"}}, rep.Recovery.Dropped)
	require.Equal(t, rep.Recovery.Dropped, shown.Dropped, "the preview must show what the repair drops")
	r, err := Open(dir, &Options{ReadOnly: true, Clock: clock})
	require.NoError(t, err)
	defer r.Close()
	got := r.Stats()
	require.Equal(t, got.Delayed, shownStats.Delayed)
	require.Equal(t, got.Ready, shownStats.Ready)
	require.EqualValues(t, 2, shownStats.Delayed)
}

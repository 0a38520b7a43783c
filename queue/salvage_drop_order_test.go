package queue

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
	"github.com/walq/walq/internal/fakeclock"
)

// Recovery.Dropped lists the messages whose record was lost first, then
// those whose record is another's, each by Seq (see the package
// documentation); the preview lists them in the repair's order, also
// when the misplaced message has the lower Seq.
func TestSalvageDropsLostBeforeMisplaced(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	q, err := Open(dir, &Options{SegmentSize: 1 << 20, Clock: clock, manualCompact: true})
	require.NoError(t, err)
	ctx := context.Background()
	for _, p := range []string{"payload of A", "payload of B", "payload of C-MARK"} {
		_, err := q.Enqueue(ctx, []byte(p), WithDelay(time.Hour), WithID(p[11:12]))
		require.NoError(t, err)
	}
	a, _ := misplaceFirst(q) // A names B's record
	require.NoError(t, q.Close())
	loseRecords(t, dir, "C-MARK")

	shown := previewDropped(t, dir, clock)
	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []Lost{{Seq: 3, ID: "C"}, {Seq: a.Seq, ID: "A"}}, rep.Recovery.Dropped)
	require.Equal(t, rep.Recovery.Dropped, shown, "the preview must list the drops in the repair's order")
}

// A sorted queue's values whose records were lost are dropped by Seq, not
// in the order of their keys.
func TestSalvageDropsLostValuesBySeq(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	s, err := OpenSorted[int64](dir, &SortedOptions{Options: Options{SegmentSize: 1 << 20, Clock: clock, manualCompact: true}})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "Z", []byte("payload of Z-MARK")))
	require.NoError(t, s.Publish(ctx, 2, "A", []byte("payload of A-MARK")))
	require.NoError(t, s.Publish(ctx, 3, "M", []byte("payload of M-MARK")))
	require.NoError(t, s.Close())
	loseRecords(t, dir, "Z-MARK", "A-MARK", "M-MARK")

	shown := previewDropped(t, dir, clock)
	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []Lost{{Seq: 1, ID: "Z"}, {Seq: 2, ID: "A"}, {Seq: 3, ID: "M"}}, rep.Recovery.Dropped)
	require.Equal(t, rep.Recovery.Dropped, shown)
}

// A sorted queue's values whose records are another's are dropped by Seq,
// a leased one among pending ones.
func TestSalvageDropsMisplacedValuesBySeq(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	s, err := OpenSorted[int64](dir, &SortedOptions{Options: Options{SegmentSize: 4096, Clock: clock, AckTimeout: time.Minute, manualCompact: true}})
	require.NoError(t, err)
	ctx := context.Background()
	for i, k := range []string{"K", "M", "N"} {
		require.NoError(t, s.Publish(ctx, int64(i+1), k, []byte("payload of "+k)))
	}
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "K", bs[0].Key)
	k := misplaceLeased(t, s.q, bs[0].Receipt.Lease, 0, "M")
	n := misplacePending(t, s.q, "N", "M")
	require.Less(t, k.Seq, n.Seq)
	require.NoError(t, s.Close())

	shown := previewDropped(t, dir, clock)
	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []Lost{{Seq: k.Seq, ID: "K"}, {Seq: n.Seq, ID: "N"}}, rep.Recovery.Dropped)
	require.Equal(t, rep.Recovery.Dropped, shown)
}

// misplacePending points the pending value of key at the record of other's
// pending value, and returns the value as it was.
func misplacePending(t *testing.T, q *Queue, key, other string) index.SortedValue {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	vs := map[string]index.SortedValue{}
	q.mu.st.sorted.Values(func(v index.SortedValue) bool {
		vs[v.Key] = v
		return true
	})
	v, o := vs[key], vs[other]
	require.True(t, q.mu.st.sorted.MoveValue(v, o.Loc, o.Size))
	return v
}

// loseRecords flips a byte of each mark in the log of dir, so that the
// entries that hold them fail their checksums.
func loseRecords(t *testing.T, dir string, marks ...string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, logDir, "*"))
	require.NoError(t, err)
	for _, mark := range marks {
		hit := false
		for _, seg := range segs {
			b, err := os.ReadFile(seg)
			require.NoError(t, err)
			if i := bytes.Index(b, []byte(mark)); i >= 0 {
				b[i] ^= 0x20
				require.NoError(t, os.WriteFile(seg, b, 0o600))
				hit = true
			}
		}
		require.True(t, hit, "no record holds %s", mark)
	}
}

// previewDropped returns the Recovery.Dropped of a read-only salvaging
// open of dir.
func previewDropped(t *testing.T, dir string, clock *fakeclock.Clock) []Lost {
	t.Helper()
	p, err := Open(dir, &Options{ReadOnly: true, Salvage: true, Clock: clock})
	require.NoError(t, err)
	defer p.Close()
	return p.Recovery().Dropped
}

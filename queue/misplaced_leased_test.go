package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
	"github.com/walq/walq/internal/fakeclock"
)

// A leased sorted value whose index entry names another value's record
// (every checksum fine): Verify reports it, the preview and Repair drop it
// alike, and after the repair every other value is delivered once with its
// own bytes and nothing fails. Both when the process crashed with the
// lease outstanding and when it closed with the lease still running.
func TestRepairDropsMisplacedLeasedValue(t *testing.T) {
	for _, crash := range []bool{true, false} {
		name := map[bool]string{true: "crash", false: "close"}[crash]
		t.Run(name, func(t *testing.T) {
			clock := fakeclock.New()
			o := Options{SegmentSize: 4096, Clock: clock, AckTimeout: time.Minute, manualCompact: true}
			src := t.TempDir()
			s, err := OpenSorted[int64](src, &SortedOptions{Options: o})
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, s.Publish(ctx, 1, "K", []byte("payload of K")))
			require.NoError(t, s.Publish(ctx, 2, "M", []byte("payload of M")))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Equal(t, "K", bs[0].Key)
			k := misplaceLeased(t, s.q, bs[0].Receipt.Lease, 0, "M")
			require.NoError(t, s.q.snapshot()) // the snapshot holds the misplaced leased value
			dir := src
			if crash {
				dir = t.TempDir()
				require.NoError(t, os.CopyFS(dir, os.DirFS(src))) // what a kill -9 leaves
			}
			require.NoError(t, s.Close())

			_, err = Verify(dir, nil)
			require.ErrorIs(t, err, ErrCorrupt, "Verify must report a leased value whose record is another's")
			p, err := Open(dir, &Options{ReadOnly: true, Salvage: true, Clock: clock})
			require.NoError(t, err)
			shown := p.Recovery().Dropped
			require.NoError(t, p.Close())
			rep, err := Repair(dir, nil)
			require.NoError(t, err)
			require.Equal(t, []Lost{{Seq: k.Seq, ID: "K"}}, rep.Recovery.Dropped)
			require.Equal(t, rep.Recovery.Dropped, shown, "the preview must show what the repair drops")

			s, err = OpenSorted[int64](dir, &SortedOptions{Options: o})
			require.NoError(t, err)
			defer s.Close()
			clock.Advance(time.Hour) // any lease left ends
			got := map[string][]string{}
			for {
				bs, err := s.TryPull(10)
				if errors.Is(err, ErrEmpty) {
					break
				}
				require.NoError(t, err)
				for _, b := range bs {
					got[b.Key] = append(got[b.Key], payloadsOf(b)...)
					require.NoError(t, b.Ack())
				}
			}
			require.Equal(t, map[string][]string{"M": {"payload of M"}}, got)
			require.NoError(t, s.q.Compact())
		})
	}
}

// misplaceLeased points the value at index i of the leased batch lease
// at the record of key's pending value, and returns the leased value as
// it was.
func misplaceLeased(t *testing.T, q *Queue, lease uint64, i int, key string) index.SortedValue {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	var other index.SortedValue
	q.mu.st.sorted.Values(func(v index.SortedValue) bool {
		if v.Key == key {
			other = v
		}
		return true
	})
	b, ok := q.mu.st.sorted.Batch(lease)
	require.True(t, ok)
	v := b.Values[i]
	require.True(t, q.mu.st.sorted.MoveLeased(lease, v.Seq, other.Loc, other.Size))
	return v
}

// A crashed process leased a batch of key K (values a and b, each at
// MaxDeliveries) and a's index entry names another value's record. The
// salvage first ends the crashed lease (both values reach the limit and
// go dead, "process crashed while the batch was leased"), then drops a;
// the preview shows the same drops and the same dead values with the same
// reasons.
func TestSalvagePreviewEndsCrashedLeaseBeforeDrop(t *testing.T) {
	clock := fakeclock.New()
	o := Options{SegmentSize: 4096, Clock: clock, AckTimeout: time.Minute, MaxDeliveries: 1, manualCompact: true}
	src := t.TempDir()
	s, err := OpenSorted[int64](src, &SortedOptions{Options: o})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "K", []byte("payload of a")))
	require.NoError(t, s.Publish(ctx, 2, "K", []byte("payload of b")))
	require.NoError(t, s.Publish(ctx, 3, "M", []byte("payload of M")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs[0].Values, 2)
	misplaceLeased(t, s.q, bs[0].Receipt.Lease, 0, "M")
	require.NoError(t, s.q.snapshot())
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(src))) // what a kill -9 leaves
	require.NoError(t, s.Close())
	ro := t.TempDir()
	require.NoError(t, os.CopyFS(ro, os.DirFS(dir)))

	dead := func(dir string, readOnly bool) string {
		t.Helper()
		oo := o
		oo.Salvage, oo.ReadOnly = true, readOnly
		s, err := OpenSorted[int64](dir, &SortedOptions{Options: oo})
		require.NoError(t, err)
		defer s.Close()
		ds, err := s.DeadValues(0, 100)
		require.NoError(t, err)
		r := s.Recovery()
		out := fmt.Sprintf("%v requeued %d dead-on-open %d", r.Dropped, r.Requeued, r.DeadOnOpen)
		for _, d := range ds {
			out += fmt.Sprintf(" %s/%d:%q", d.Key, d.Sort, d.Reason)
		}
		return out
	}
	shown := dead(ro, true)
	got := dead(dir, false)
	require.Contains(t, got, `K/2:"1 deliveries; last: process crashed while the batch was leased"`)
	require.Equal(t, got, shown, "the preview must show the salvage's drops, dead values and reasons")
}

// A crash image whose leased batch (K: a, b, c) has misplaced values,
// under no delivery limit and limits of 1 and 2: the preview reports the
// salvage's Recovery.Dropped, Requeued (the crashed batch's lease ended)
// and DeadOnOpen (of those, batches with a value at MaxDeliveries), and
// the salvage's counts.
func TestSalvagePreviewOfCrashCountsEndedLeases(t *testing.T) {
	for _, misplace := range [][]int{{1}, {0, 2}, {0, 1, 2}} {
		for _, limit := range []int{0, 1, 2} {
			t.Run(fmt.Sprintf("misplaced=%v/limit=%d", misplace, limit), func(t *testing.T) {
				clock := fakeclock.New()
				o := Options{SegmentSize: 4096, Clock: clock, AckTimeout: time.Hour, MaxDeliveries: limit, manualCompact: true}
				src := t.TempDir()
				s, err := OpenSorted[int64](src, &SortedOptions{Options: o})
				require.NoError(t, err)
				ctx := context.Background()
				for i, p := range []string{"a", "b", "c"} {
					require.NoError(t, s.Publish(ctx, int64(i+1), "K", []byte("payload of "+p)))
				}
				require.NoError(t, s.Publish(ctx, 9, "M", []byte("payload of M")))
				bs, err := s.TryPull(3)
				require.NoError(t, err)
				for _, i := range misplace {
					misplaceLeased(t, s.q, bs[0].Receipt.Lease, i, "M")
				}
				require.NoError(t, s.q.snapshot())
				dir, ro := t.TempDir(), t.TempDir()
				require.NoError(t, os.CopyFS(dir, os.DirFS(src))) // what a kill -9 leaves
				require.NoError(t, os.CopyFS(ro, os.DirFS(src)))
				require.NoError(t, s.Close())
				view := func(dir string, readOnly bool) string {
					t.Helper()
					oo := o
					oo.Salvage, oo.ReadOnly = true, readOnly
					s, err := OpenSorted[int64](dir, &SortedOptions{Options: oo})
					require.NoError(t, err)
					defer s.Close()
					r, st := s.Recovery(), s.Stats()
					return fmt.Sprintf("dropped %v requeued %d dead-on-open %d; pending %d leased %d batches %d dead %d keys %d",
						r.Dropped, r.Requeued, r.DeadOnOpen, st.SortedPending, st.SortedLeased, st.SortedBatches, st.SortedDead, st.SortedKeys)
				}
				shown := view(ro, true)
				got := view(dir, false)
				require.Contains(t, got, "requeued 1 ")
				require.Equal(t, got, shown, "the preview must report what the salvage does")
			})
		}
	}
}

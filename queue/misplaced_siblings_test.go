package queue

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// A batch of key K (values a, b, c) is leased, each value at its last
// delivery under the application's MaxDeliveries, when the process closes
// cleanly (the lease runs on); b's index entry names another value's
// record. A salvaging open with the application's options drops b and
// nothing else: a and c stay leased to the batch, not dead (nothing
// failed them), and the consumer's receipt acks them. The read-only
// preview shows the same.
func TestMisplacedDropKeepsSiblingsLeased(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprint("MaxDeliveries=", limit), func(t *testing.T) {
			clock := fakeclock.New()
			o := Options{SegmentSize: 4096, Clock: clock, AckTimeout: time.Hour, MaxDeliveries: limit, manualCompact: true}
			dir := t.TempDir()
			s, err := OpenSorted[int64](dir, &SortedOptions{Options: o})
			require.NoError(t, err)
			ctx := context.Background()
			for i, p := range []string{"a", "b", "c"} {
				require.NoError(t, s.Publish(ctx, int64(i+1), "K", []byte("payload of "+p)))
			}
			require.NoError(t, s.Publish(ctx, 9, "M", []byte("payload of M")))
			var b *Batch[int64]
			for range limit { // every delivery but the last one is nacked
				if b != nil {
					require.NoError(t, b.Nack(0))
				}
				bs, err := s.TryPull(3)
				require.NoError(t, err)
				b = bs[0]
				require.Len(t, b.Values, 3)
			}
			misplaced := misplaceLeased(t, s.q, b.Receipt.Lease, 1, "M")
			require.NoError(t, s.q.snapshot())
			require.NoError(t, s.Close())
			ro := t.TempDir()
			require.NoError(t, os.CopyFS(ro, os.DirFS(dir)))

			view := func(dir string, readOnly bool) (string, *Sorted[int64]) {
				t.Helper()
				oo := o
				oo.Salvage, oo.ReadOnly = true, readOnly
				s, err := OpenSorted[int64](dir, &SortedOptions{Options: oo})
				require.NoError(t, err)
				st := s.Stats()
				return fmt.Sprintf("dropped %v, dead %d, leased %d in %d batches, pending %d",
					s.Recovery().Dropped, st.SortedDead, st.SortedLeased, st.SortedBatches, st.SortedPending), s
			}
			shown, p := view(ro, true)
			require.NoError(t, p.Close())
			got, s := view(dir, false)
			defer s.Close()
			want := fmt.Sprintf("dropped [{%d K}], dead 0, leased 2 in 1 batches, pending 1", misplaced.Seq)
			require.Equal(t, want, got, "the salvage must drop b alone and leave its siblings leased")
			require.Equal(t, got, shown, "the preview must show what the salvage does")
			replayed := t.TempDir() // the log as the salvage left it, replayed by an inspection
			require.NoError(t, os.CopyFS(replayed, os.DirFS(dir)))
			r, err := OpenSorted[int64](replayed, &SortedOptions{Options: Options{ReadOnly: true, Clock: clock}})
			require.NoError(t, err)
			rs := r.Stats()
			require.NoError(t, r.Close())
			require.Equal(t, [4]int{0, 2, 1, 1}, [4]int{rs.SortedDead, rs.SortedLeased, rs.SortedBatches, rs.SortedPending},
				"a replay of the drop leaves the siblings leased")
			require.NoError(t, s.Ack(b.Receipt), "the consumer's receipt acks the siblings")
			st := s.Stats()
			require.Equal(t, [3]int{0, 0, 1}, [3]int{st.SortedDead, st.SortedLeased, st.SortedPending})
		})
	}
}

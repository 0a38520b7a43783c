package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSalvagePreviewEndsCrashedLeases: after a kill -9, a read-only
// salvaging open (the preview) shows the leases of the crashed process
// ended, as the salvage ends them: its Stats, Browse and DeadLetters count
// and list their messages ready again, or dead at MaxDeliveries with the
// salvage's reason, not in flight.
func TestSalvagePreviewEndsCrashedLeases(t *testing.T) {
	clk := newFakeClock()
	o := queue.Options{Clock: clk, MaxDeliveries: 2, AckTimeout: time.Hour, ManualRequeue: true}
	src := t.TempDir()
	q := open(t, src, &o)
	for _, id := range []string{"a", "b", "c"} {
		enqueue(t, q, "payload of "+id, queue.WithID(id))
	}
	require.NoError(t, tryDequeue(t, q).Nack(0))
	require.Equal(t, "a", tryDequeue(t, q).ID) // its second delivery: dead when the lease ends
	require.Equal(t, "b", tryDequeue(t, q).ID) // its first: ready again
	dir, ro := crashImage(t, src), crashImage(t, src)
	require.NoError(t, q.Close())
	view := func(dir string, readOnly bool) string {
		t.Helper()
		oo := o
		oo.Salvage, oo.ReadOnly = true, readOnly
		q := open(t, dir, &oo)
		defer q.Close()
		r, s := q.Recovery(), q.Stats()
		out := []string{fmt.Sprintf("requeued %d dead-on-open %d; ready %d delayed %d in flight %d dead %d; expired %d dead-lettered %d",
			r.Requeued, r.DeadOnOpen, s.Ready, s.Delayed, s.InFlight, s.Dead, s.Expired, s.DeadLettered)}
		for st := queue.StateReady; st <= queue.StateDead; st++ {
			ms, err := q.Browse(st, 0, 100)
			require.NoError(t, err)
			for _, m := range ms {
				out = append(out, fmt.Sprintf("%s %s deliveries %d reason %q", st, m.ID, m.Deliveries, m.Reason))
			}
		}
		dls, err := q.DeadLetters(0, 0)
		require.NoError(t, err)
		for _, d := range dls {
			out = append(out, fmt.Sprintf("dead letter %s %q", d.ID, d.Payload))
		}
		return strings.Join(out, "\n")
	}
	got := view(dir, false)
	require.Contains(t, got, "requeued 2 dead-on-open 1; ready 2 delayed 0 in flight 0 dead 1")
	require.Equal(t, got, view(ro, true), "the preview must show what the salvage does")
}

// TestSalvagePreviewEndsCrashedBatch is TestSalvagePreviewEndsCrashedLeases
// for a sorted queue's leased batch, under no delivery limit and a limit
// of one.
func TestSalvagePreviewEndsCrashedBatch(t *testing.T) {
	for _, limit := range []int{0, 1} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			clk := newFakeClock()
			so := queue.SortedOptions{Options: queue.Options{Clock: clk, MaxDeliveries: limit, AckTimeout: time.Hour, ManualRequeue: true}}
			src := t.TempDir()
			s, err := queue.OpenSorted[int64](src, &so)
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, s.Publish(ctx, 1, "K", []byte("k1")))
			require.NoError(t, s.Publish(ctx, 2, "K", []byte("k2")))
			require.NoError(t, s.Publish(ctx, 3, "M", []byte("m3")))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Equal(t, "K", bs[0].Key)
			dir, ro := crashImage(t, src), crashImage(t, src)
			require.NoError(t, s.Close())
			view := func(dir string, readOnly bool) string {
				t.Helper()
				oo := so
				oo.Salvage, oo.ReadOnly = true, readOnly
				s, err := queue.OpenSorted[int64](dir, &oo)
				require.NoError(t, err)
				defer s.Close()
				r, st := s.Recovery(), s.Stats()
				out := fmt.Sprintf("requeued %d dead-on-open %d; pending %d leased %d batches %d dead %d keys %d",
					r.Requeued, r.DeadOnOpen, st.SortedPending, st.SortedLeased, st.SortedBatches, st.SortedDead, st.SortedKeys)
				ds, err := s.DeadValues(0, 0)
				require.NoError(t, err)
				for _, d := range ds {
					out += fmt.Sprintf("\ndead value %d %s %q %q", d.Sort, d.Key, d.Reason, d.Payload)
				}
				return out
			}
			got := view(dir, false)
			require.Contains(t, got, "requeued 1 ")
			require.Contains(t, got, "leased 0 batches 0")
			require.Equal(t, got, view(ro, true), "the preview must show what the salvage does")
		})
	}
}

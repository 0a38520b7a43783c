package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSortedReplaysAsLive is TestAckQueueReplaysAsLive for the sorted and
// the windowed queue, with and without single flight: random publishes,
// pulls, acks, nacks with delays, extends, dead-letterings, requeues of
// expired leases and of dead values, Stats and clock steps forward and
// back, stopped at a random point; then the live queue, its crash image
// and the crash image of the queue after a Compact (the snapshot path)
// must show the same counts, keys and dead values, and pull the same
// batches now, once the clock has moved on, and after a step back. 40
// seeds of each form, 10 under the race detector.
func TestSortedReplaysAsLive(t *testing.T) {
	seeds := uint64(40)
	if raceEnabled {
		seeds = 10
	}
	for _, form := range []struct {
		name             string
		windowed, single bool
	}{{"sorted", false, false}, {"sorted-single", false, true}, {"windowed", true, false}, {"windowed-single", true, true}} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", form.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 13))
				clk := newFakeClock()
				so := queue.SortedOptions{Options: queue.Options{Clock: clk, ManualRequeue: true, AckTimeout: 30 * time.Second,
					MaxDeliveries: 3}, SingleFlight: form.single}
				wo := &queue.WindowOptions{SortedOptions: so, Window: 20 * time.Second}
				dir := t.TempDir()
				if form.windowed {
					replayAsLive(t, rng, clk, dir, func(dir string) (*queue.Sorted[time.Time], publishFunc, error) {
						w, err := queue.OpenWindowed(dir, wo)
						if err != nil {
							return nil, nil, err
						}
						return w.Sorted, func(ctx context.Context, _ int64, key string, p []byte) error {
							return w.Publish(ctx, key, p)
						}, nil
					})
					return
				}
				replayAsLive(t, rng, clk, dir, func(dir string) (*queue.Sorted[int64], publishFunc, error) {
					s, err := queue.OpenSorted[int64](dir, &so)
					if err != nil {
						return nil, nil, err
					}
					return s, s.Publish, nil
				})
			})
		}
	}
}

// publishFunc publishes a value; the windowed form ignores sort (its sort
// key is the publish time).
type publishFunc func(ctx context.Context, sort int64, key string, p []byte) error

// replayAsLive runs TestSortedReplaysAsLive on the queue that openq opens.
func replayAsLive[K queue.SortKey](t *testing.T, rng *rand.Rand, clk interface{ Advance(time.Duration) }, dir string,
	openq func(dir string) (*queue.Sorted[K], publishFunc, error)) {
	t.Helper()
	s, publish, err := openq(dir)
	require.NoError(t, err)
	defer s.Close()
	kept := randomSortedRun(t, rng, s, publish, clk)
	requireReplaysAsLive(t, rng, dir, s, kept, func(dir string) *queue.Sorted[K] {
		r, _, err := openq(dir)
		require.NoError(t, err)
		return r
	}, func(s *queue.Sorted[K]) sortedView { return probeSorted(t, s, clk) })
}

// randomSortedRun makes between 10 and 80 random calls on s and returns
// the batches it may hold leases of: pulled and not settled.
func randomSortedRun[K queue.SortKey](t *testing.T, rng *rand.Rand, s *queue.Sorted[K], publish publishFunc,
	clk interface{ Advance(time.Duration) }) []*queue.Batch[K] {
	ctx := context.Background()
	var kept []*queue.Batch[K]
	for i := range 10 + rng.IntN(71) {
		switch op := rng.IntN(20); {
		case op < 6:
			require.NoError(t, publish(ctx, rng.Int64N(20)-5, fmt.Sprint("k", rng.IntN(4)), []byte(fmt.Sprint("v", i))))
		case op < 10:
			bs, err := s.TryPull(1 + rng.IntN(4))
			if err != nil {
				require.ErrorIs(t, err, queue.ErrEmpty)
				continue
			}
			kept = append(kept, bs...)
		case op < 14 && len(kept) > 0:
			j := rng.IntN(len(kept))
			b := kept[j]
			kept = append(kept[:j], kept[j+1:]...)
			if rng.IntN(4) == 0 {
				if err := b.Extend(time.Duration(1+rng.IntN(60)) * time.Second); err != nil {
					require.ErrorIs(t, err, queue.ErrLeaseLost)
				}
				kept = append(kept, b)
				continue
			}
			if !settleAny(t, rng, b) {
				kept = append(kept, b) // a step back of the clock may give the lease back
			}
		case op < 15:
			_, err := s.RequeueExpired()
			require.NoError(t, err)
		case op < 16:
			_, err := s.RequeueAllDead()
			require.NoError(t, err)
		case op < 17:
			s.Stats()
		default:
			clk.Advance(time.Duration(rng.IntN(81)-40) * time.Second)
		}
	}
	return kept
}

// sortedView is what probeSorted sees of a sorted queue.
type sortedView struct {
	counts  [5]int    // Stats: SortedPending, SortedKeys, SortedBatches, SortedLeased, SortedDead
	totals  [3]uint64 // Stats: Published, Pulled, BatchesAcked
	oldest  int64     // Stats: OldestEnqueuedAt (unix ns)
	keys    []string  // Keys: "key@first/pending" of each key
	dead    []string  // DeadValues: "seq/deliveries/reason" of each
	pulls   [3][]string
	expired int // leases RequeueExpired ended after the pulls and 31 s more
}

// probeSorted looks at s, then pulls everything at the clock's time, a
// minute later, and after a step back of 50 s from there; it leaves the
// clock where it found it.
func probeSorted[K queue.SortKey](t *testing.T, s *queue.Sorted[K], clk interface{ Advance(time.Duration) }) sortedView {
	t.Helper()
	st := s.Stats()
	v := sortedView{counts: [5]int{st.SortedPending, st.SortedKeys, st.SortedBatches, st.SortedLeased, st.SortedDead},
		totals: [3]uint64{st.Published, st.Pulled, st.BatchesAcked}, oldest: st.OldestEnqueuedAt.UnixNano()}
	ks, err := s.Keys("", 1000)
	require.NoError(t, err)
	for _, k := range ks {
		v.keys = append(v.keys, fmt.Sprintf("%s@%v/%d/%d", k.Key, k.First, k.Values, k.Oldest.UnixNano()))
	}
	ds, err := s.DeadValues(0, 1000)
	require.NoError(t, err)
	for _, d := range ds {
		v.dead = append(v.dead, fmt.Sprintf("%d/%d/%s", d.Seq, d.Deliveries, d.Reason))
	}
	for i, step := range []time.Duration{0, time.Minute, -50 * time.Second} {
		clk.Advance(step)
		v.pulls[i] = pullAll(t, s)
	}
	clk.Advance(31 * time.Second)
	n, err := s.RequeueExpired()
	require.NoError(t, err)
	v.expired = n
	clk.Advance(-41 * time.Second)
	return v
}

// pullAll pulls until the queue has nothing to pull and writes each batch
// as key[payload/sort/deliveries ...].
func pullAll[K queue.SortKey](t *testing.T, s *queue.Sorted[K]) []string {
	t.Helper()
	var out []string
	for {
		bs, err := s.TryPull(1)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			return out
		}
		for _, b := range bs {
			d := b.Key + "["
			for _, val := range b.Values {
				d += fmt.Sprintf("%s/%v/%d ", val.Payload, val.Sort, val.Deliveries)
			}
			out = append(out, d+"]")
		}
	}
}

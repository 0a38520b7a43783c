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

// TestSortedHoldsReplayAsLive runs random publishes, pulls, acks, nacks
// (with delays), Stats and clock steps forward and back, then compares
// the keys a pull takes from the live queue, from its crash image, and
// from the crash image of the queue after a Compact, with and without
// single flight. 60 seeds of each, 15 under the race detector.
func TestSortedHoldsReplayAsLive(t *testing.T) {
	seeds := uint64(60)
	if raceEnabled {
		seeds = 15
	}
	for _, single := range []bool{false, true} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("single=%v/seed=%d", single, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				dir := t.TempDir()
				clk := newFakeClock()
				o := &queue.SortedOptions{Options: queue.Options{Clock: clk, ManualRequeue: true, AckTimeout: 24 * time.Hour},
					SingleFlight: single}
				s, err := queue.OpenSorted[int64](dir, o)
				require.NoError(t, err)
				defer s.Close()
				ctx := context.Background()
				var kept []*queue.Batch[int64]
				for range 40 {
					switch op := rng.IntN(10); {
					case op < 3:
						require.NoError(t, s.Publish(ctx, rng.Int64N(20), fmt.Sprint("k", rng.IntN(5)), []byte("v")))
					case op < 6:
						bs, err := s.TryPull(1)
						if err != nil {
							require.ErrorIs(t, err, queue.ErrEmpty)
							continue
						}
						kept = append(kept, bs...)
					case op < 8 && len(kept) > 0:
						i := rng.IntN(len(kept))
						b := kept[i]
						kept = append(kept[:i], kept[i+1:]...)
						if rng.IntN(3) == 0 {
							require.NoError(t, b.Ack())
						} else {
							require.NoError(t, b.Nack(time.Duration(rng.IntN(60))*time.Second))
						}
					case op < 9:
						s.Stats()
					default:
						clk.Advance(time.Duration(rng.IntN(81)-40) * time.Second)
					}
				}
				for _, b := range kept { // no lease is left for an open to end
					require.NoError(t, b.Nack(time.Duration(rng.IntN(60))*time.Second))
				}
				crashed := crashImage(t, dir)
				require.NoError(t, s.Compact())
				compacted := crashImage(t, dir)
				probe := func(s *queue.Sorted[int64]) []string {
					bs, err := s.TryPull(1000)
					if err != nil {
						require.ErrorIs(t, err, queue.ErrEmpty)
					}
					var keys []string
					for _, b := range bs {
						keys = append(keys, b.Key)
					}
					return keys
				}
				live := probe(s)
				require.NoError(t, s.Close())
				for _, img := range []string{crashed, compacted} {
					r, err := queue.OpenSorted[int64](img, o)
					require.NoError(t, err)
					require.Equal(t, live, probe(r), "the reopened queue pulls what the live one pulled")
					require.NoError(t, r.Close())
				}
			})
		}
	}
}

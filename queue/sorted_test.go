package queue_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

func payloads[K queue.SortKey](b *queue.Batch[K]) []string {
	var out []string
	for _, p := range b.Payloads() {
		out = append(out, string(p))
	}
	return out
}

func TestSortedOrderByPriority(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	publish := func(prio int, key, v string) {
		require.NoError(t, sq.Publish(ctx, prio, key, []byte(v)))
	}
	publish(5, "b", "b5")
	publish(-3, "a", "a-3")
	publish(9, "a", "a9")
	publish(1, "c", "c1")
	publish(0, "b", "b0")

	bs, err := sq.TryPull(100)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	require.Equal(t, "a", bs[0].Key, "a's smallest sort key is -3")
	require.Equal(t, []string{"a-3", "a9"}, payloads(bs[0]))
	require.Equal(t, "b", bs[1].Key)
	require.Equal(t, []string{"b0", "b5"}, payloads(bs[1]))
	require.Equal(t, "c", bs[2].Key)
	require.Equal(t, -3, bs[0].Values[0].Sort)
	for _, b := range bs {
		require.NoError(t, b.Ack())
	}
	_, err = sq.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty)
}

func TestSortedPullStopsAtMaxWithWholeKeys(t *testing.T) {
	sq, err := queue.OpenSorted[float64](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		for _, key := range []string{"x", "y", "z"} {
			require.NoError(t, sq.Publish(ctx, float64(i)+0.5, key, []byte(key)))
		}
	}
	bs, err := sq.TryPull(4)
	require.NoError(t, err)
	require.Len(t, bs, 2, "x (3 values) then y (3 values): 6 >= 4, stop")
	require.Len(t, bs[0].Values, 3)
	bs, err = sq.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "z", bs[0].Key)
	require.Len(t, bs[0].Values, 3, "a key is never split")
}

func TestSortKeyKinds(t *testing.T) {
	ctx := context.Background()
	t.Run("time", func(t *testing.T) {
		sq, err := queue.OpenSorted[time.Time](t.TempDir(), nil)
		require.NoError(t, err)
		defer sq.Close()
		base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		require.NoError(t, sq.Publish(ctx, base.Add(time.Hour), "late", nil))
		require.NoError(t, sq.Publish(ctx, base, "early", nil))
		bs, err := sq.TryPull(10)
		require.NoError(t, err)
		require.Equal(t, "early", bs[0].Key)
		require.True(t, bs[0].Values[0].Sort.Equal(base))
	})
	t.Run("string", func(t *testing.T) {
		sq, err := queue.OpenSorted[string](t.TempDir(), nil)
		require.NoError(t, err)
		defer sq.Close()
		require.NoError(t, sq.Publish(ctx, "b", "k2", nil))
		require.NoError(t, sq.Publish(ctx, "a", "k1", nil))
		bs, err := sq.TryPull(10)
		require.NoError(t, err)
		require.Equal(t, "k1", bs[0].Key)
	})
	t.Run("named float with negatives", func(t *testing.T) {
		type Weight float32
		sq, err := queue.OpenSorted[Weight](t.TempDir(), nil)
		require.NoError(t, err)
		defer sq.Close()
		want := []Weight{-2.5, -1, 0, 0.25, 3}
		for i, w := range []Weight{3, -1, 0.25, -2.5, 0} {
			require.NoError(t, sq.Publish(ctx, w, fmt.Sprint("k", i), nil))
		}
		bs, err := sq.TryPull(10)
		require.NoError(t, err)
		var got []Weight
		for _, b := range bs {
			got = append(got, b.Values[0].Sort)
		}
		require.Equal(t, want, got)
	})
}

func TestSortedNackExpiryAndDead(t *testing.T) {
	clk := newFakeClock()
	o := &queue.SortedOptions{Options: queue.Options{Clock: clk, AckTimeout: time.Minute, MaxDeliveries: 2, ManualRequeue: true}}
	sq, err := queue.OpenSorted[int](t.TempDir(), o)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	require.NoError(t, sq.Publish(ctx, 2, "k", []byte("v2")))
	require.NoError(t, sq.Publish(ctx, 1, "other", []byte("o1")))

	bs, err := sq.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "other", bs[0].Key)
	require.NoError(t, bs[0].Nack(time.Minute))
	bs, err = sq.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1, "a nacked key waits out its delay")
	require.Equal(t, "k", bs[0].Key)

	clk.Advance(61 * time.Second)
	n, err := sq.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ErrorIs(t, bs[0].Ack(), queue.ErrLeaseLost)
	bs, err = sq.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, "other", bs[0].Key, "values return at their original sort keys")
	require.Equal(t, 2, bs[0].Values[0].Deliveries)
	require.NoError(t, bs[0].Nack(0))
	require.NoError(t, bs[1].Extend(time.Hour))
	st := sq.Stats()
	require.Equal(t, 1, st.SortedDead, "o1 had its 2 deliveries")
	require.Equal(t, 1, st.SortedLeased)
	require.NoError(t, bs[1].DeadLetter("bad"))
	require.Equal(t, 2, sq.Stats().SortedDead)
}

func TestSortedSingleFlight(t *testing.T) {
	o := &queue.SortedOptions{SingleFlight: true}
	sq, err := queue.OpenSorted[int](t.TempDir(), o)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	require.NoError(t, sq.Publish(ctx, 1, "k", []byte("first")))
	bs, err := sq.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, sq.Publish(ctx, 2, "k", []byte("second")))
	_, err = sq.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "k has a batch in flight")
	require.NoError(t, bs[0].Ack())
	bs, err = sq.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, []string{"second"}, payloads(bs[0]))
}

func TestWindowedRelease(t *testing.T) {
	clk := newFakeClock()
	w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{
		SortedOptions: queue.SortedOptions{Options: queue.Options{Clock: clk, AckTimeout: time.Hour}},
		Window:        3 * time.Second,
	})
	require.NoError(t, err)
	defer w.Close()
	ctx := context.Background()
	require.NoError(t, w.Publish(ctx, "customer-1", []byte("a")))
	clk.Advance(time.Second)
	require.NoError(t, w.Publish(ctx, "customer-2", []byte("x")))
	require.NoError(t, w.Publish(ctx, "customer-1", []byte("b")))
	_, err = w.TryPull(100)
	require.ErrorIs(t, err, queue.ErrEmpty, "no window has closed")

	clk.Advance(2 * time.Second) // customer-1's oldest value is 3s old
	bs, err := w.TryPull(100)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, []string{"a", "b"}, payloads(bs[0]))
	require.NoError(t, bs[0].Ack())
	require.NoError(t, w.Publish(ctx, "customer-1", []byte("c")), "starts a new window")

	// A blocking Pull waits exactly until customer-2's window closes.
	got := make(chan []*queue.Batch[time.Time], 1)
	go func() {
		bs, err := w.Pull(ctx, 100)
		if err != nil {
			panic(err)
		}
		got <- bs
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case bs := <-got:
			require.Equal(t, "customer-2", bs[0].Key)
			require.Len(t, bs, 1, "customer-1's new window is still open")
			require.False(t, clk.Now().Before(bs[0].Values[0].PublishedAt.Add(3*time.Second)))
			return
		case <-time.After(5 * time.Millisecond):
			require.True(t, time.Now().Before(deadline), "Pull never returned")
			clk.Advance(100 * time.Millisecond)
		}
	}
}

func TestSortedCrashAndReopen(t *testing.T) {
	dir := t.TempDir()
	sq, err := queue.OpenSorted[int](dir, nil)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	for i, key := range []string{"acked", "leased", "pending"} {
		require.NoError(t, sq.Publish(ctx, i, key, []byte(key)))
	}
	bs, err := sq.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].Ack())
	_, err = sq.TryPull(1) // "leased" is held when the process dies
	require.NoError(t, err)

	img := crashImage(t, dir)
	sq2, err := queue.OpenSorted[int](img, nil)
	require.NoError(t, err)
	defer sq2.Close()
	require.Equal(t, 1, sq2.Recovery().Requeued)
	bs, err = sq2.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, "leased", bs[0].Key)
	require.Equal(t, 2, bs[0].Values[0].Deliveries)
	require.Equal(t, "pending", bs[1].Key)

	// A compaction and a clean reopen keep the same state.
	require.NoError(t, bs[1].Nack(0))
	require.NoError(t, sq2.Compact())
	require.NoError(t, sq2.Close())
	sq3, err := queue.OpenSorted[int](img, nil)
	require.NoError(t, err)
	defer sq3.Close()
	require.NoError(t, sq3.Ack(bs[0].Receipt), "a batch lease survives a clean close")
	st := sq3.Stats()
	require.Equal(t, 1, st.SortedPending)
	require.Equal(t, 0, st.SortedBatches+st.SortedDead, "%+v", st)
}

func TestSortedConcurrentPublishersAndPullers(t *testing.T) {
	sq, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	defer sq.Close()
	const publishers, each, keys = 4, 200, 10
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				v := fmt.Sprintf("%d-%03d", p, i)
				if err := sq.Publish(ctx, int64(i), fmt.Sprint("key", (p+i)%keys), []byte(v)); err != nil {
					panic(err)
				}
			}
		}(p)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var pw sync.WaitGroup
	for c := 0; c < 3; c++ {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for {
				bs, err := sq.Pull(ctx, 50)
				if err != nil {
					return
				}
				for _, b := range bs {
					ps := payloads(b)
					require.True(t, sort.SliceIsSorted(b.Values, func(i, j int) bool { return b.Values[i].Sort < b.Values[j].Sort }))
					if err := b.Ack(); err != nil {
						panic(err)
					}
					mu.Lock()
					for _, p := range ps {
						seen[p]++
					}
					if len(seen) == publishers*each {
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	pw.Wait()
	require.ErrorIs(t, ctx.Err(), context.Canceled, "ended by the last ack, not by the deadline")
	require.Len(t, seen, publishers*each)
	for v, n := range seen {
		require.Equal(t, 1, n, "value %s pulled %d times", v, n)
	}
}

func TestSortedPublishCopiesPayload(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	buf := []byte("first")
	require.NoError(t, sq.Publish(context.Background(), 1, "k", buf))
	copy(buf, "XXXXX") // the caller reuses its buffer
	bs, err := sq.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, []string{"first"}, payloads(bs[0]))
}

package redisq_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestGivenBackNotDelivered: a lease taken for a grouped Dequeue whose
// caller left while its call was held (CLIENT PAUSE WRITE) is given
// back as never handed out. No consumer got it, so it is no delivery:
// with MaxDeliveries 2 and consumers that keep leaving, no message is
// dead-lettered, every message a consumer gets says it is its first
// delivery (each is acked the first time), and no nack is counted.
func TestGivenBackNotDelivered(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "givenback",
		&redisq.Options{AckTimeout: time.Minute, MaxDeliveries: 2})
	require.NoError(t, err)
	defer q.Close()
	const n = 200
	for i := range n {
		_, err := q.Enqueue(ctx, []byte("m"), queue.WithID(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	done := make(chan struct{})
	var pauses sync.WaitGroup
	pauses.Add(1)
	go func() { // holds the writes 20ms out of every 40ms
		defer pauses.Done()
		ctl := srv.Client()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctl.Do(ctx, "CLIENT", "PAUSE", 20, "WRITE")
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { close(done); pauses.Wait() }()

	var mu sync.Mutex
	got := map[string]int{} // id -> deliveries the message said it had
	left := 0
	var wg sync.WaitGroup
	stop := time.Now().Add(30 * time.Second)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for time.Now().Before(stop) {
				mu.Lock()
				all := len(got) == n
				mu.Unlock()
				if all {
					return
				}
				if s, err := q.StatsContext(ctx); err == nil && s.Dead > 0 {
					return // dead-lettered: reported below
				}
				cctx, cancel := context.WithTimeout(ctx, time.Duration(1+rng.IntN(30))*time.Millisecond)
				m, err := q.Dequeue(cctx)
				cancel()
				if err != nil {
					require.ErrorIs(t, err, context.DeadlineExceeded)
					mu.Lock()
					left++
					mu.Unlock()
					continue
				}
				require.NoError(t, m.Ack())
				mu.Lock()
				got[m.ID] = m.Deliveries
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d Dequeues left at their context's end", left)
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Dead, "dead-lettered, though no consumer got them: %+v", s)
	require.Zero(t, s.DeadLettered, "%+v", s)
	require.Zero(t, s.Nacked, "no consumer nacked: %+v", s)
	require.Equal(t, n, len(got), "every message acked within 30s: %+v", s)
	for id, d := range got {
		require.Equal(t, 1, d, "message %s: its first receipt by a consumer said %d deliveries", id, d)
	}
	require.Equal(t, uint64(n), s.Delivered, "deliveries counted: one per message a consumer got")
}

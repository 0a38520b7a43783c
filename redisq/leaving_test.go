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

// enqueueNumbered enqueues n messages with ids 0 to n-1.
func enqueueNumbered(t *testing.T, q *redisq.Queue, n int) {
	t.Helper()
	for i := range n {
		_, err := q.Enqueue(context.Background(), []byte("m"), queue.WithID(strconv.Itoa(i)))
		require.NoError(t, err)
	}
}

// holdWrites makes srv hold every write (CLIENT PAUSE WRITE) 20ms out of
// every 40ms until the test ends.
func holdWrites(t *testing.T, srv *redistest.Server) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctl := srv.Client()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctl.Do(context.Background(), "CLIENT", "PAUSE", 20, "WRITE")
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { close(done); wg.Wait() })
}

// leavingConsumers runs 8 consumers for up to 30s, each Dequeue under a
// context of 1 to 30ms (drawn from a logged seed), each message got
// acked at once, until n messages were acked or one was dead-lettered.
// It returns, for each message acked, the Deliveries its receipt said at
// each of its acks.
func leavingConsumers(t *testing.T, q *redisq.Queue, n int) map[string][]int {
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	var mu sync.Mutex
	acked := map[string][]int{}
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
				all := len(acked) == n
				mu.Unlock()
				if all {
					return
				}
				if s, err := q.StatsContext(ctx); err == nil && s.Dead > 0 {
					return // dead-lettered: the caller's to report
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
				acked[m.ID] = append(acked[m.ID], m.Deliveries)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d Dequeues left at their context's end", left)
	return acked
}

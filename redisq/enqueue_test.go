package redisq_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestEnqueueConcurrently: concurrent Enqueues of one handle go to the
// server together, and each stands alone: of four Enqueues of one id at
// once exactly one succeeds, whichever call they share, and the others
// fail with ErrDuplicate without failing the rest.
func TestEnqueueConcurrently(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "concurrent", &redisq.Options{TrustServer: true})
	require.NoError(t, err)
	defer q.Close()
	const rounds, ids, copies = 10, 16, 4
	calls0 := fcalls(t, rdb)
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, ids*copies)
		for i := range ids * copies {
			wg.Go(func() {
				<-start
				_, err := q.Enqueue(ctx, []byte("x"), queue.WithID(fmt.Sprint(round, "-", i%ids)))
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		ok := 0
		for err := range errs {
			if err == nil {
				ok++
			} else {
				require.ErrorIs(t, err, queue.ErrDuplicate)
			}
		}
		require.Equal(t, ids, ok, "one Enqueue per id succeeds")
	}
	calls := fcalls(t, rdb) - calls0
	require.Less(t, calls, rounds*ids*copies, "Enqueues shared calls")
	seen := map[string]bool{}
	for {
		m, err := q.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		require.False(t, seen[m.ID], "id %s delivered twice", m.ID)
		seen[m.ID] = true
		require.NoError(t, m.Ack())
	}
	require.Len(t, seen, rounds*ids)
}

var fcallStat = regexp.MustCompile(`cmdstat_fcall:calls=(\d+)`)

// fcalls returns how many FCALLs the server has run.
func fcalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	m := fcallStat.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

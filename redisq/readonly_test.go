package redisq_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestReadOnlyChangesNothing: a ReadOnly handle opened past the deadline
// of another handle's lease and the due time of its delayed message
// reads the queue (Stats, DeadLetters) and leaves every key as it was:
// it starts no housekeeper, and each call that would change the queue
// fails with queue.ErrReadOnly.
func TestReadOnlyChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	clock := queuetest.NewClock() // the writer's time stands still; the reader's is now, later
	w, err := redisq.Open(ctx, rdb, "ro", &redisq.Options{ManualRequeue: true, AckTimeout: time.Second, Clock: clock})
	require.NoError(t, err)
	defer w.Close()
	for _, id := range []string{"dead", "leased", "ready"} {
		_, err := w.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
	}
	m, err := w.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("poison"))
	leased, err := w.TryDequeue()
	require.NoError(t, err)
	_, err = w.Enqueue(ctx, []byte("later"), queue.WithID("later"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	before := keyContents(t, rdb, "walq:{ro}:*")

	r, err := redisq.Open(ctx, rdb, "ro", &redisq.Options{ReadOnly: true})
	require.NoError(t, err)
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, queue.Stats{Ready: 2, InFlight: 1, Dead: 1}, queue.Stats{Ready: st.Ready, InFlight: st.InFlight, Dead: st.Dead},
		"the due delayed message counts as ready")
	dead, err := r.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", dead[0].Reason)

	changes := map[string]func() error{
		"Enqueue":        func() error { _, err := r.Enqueue(ctx, []byte("x")); return err },
		"EnqueueBatch":   func() error { _, err := r.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("x")}}); return err },
		"TryDequeue":     func() error { _, err := r.TryDequeue(); return err },
		"Dequeue":        func() error { _, err := r.Dequeue(ctx); return err },
		"DequeueBatch":   func() error { _, err := r.DequeueBatch(ctx, 2); return err },
		"Ack":            func() error { return r.Ack(leased.Receipt) },
		"Nack":           func() error { return r.Nack(leased.Receipt, 0) },
		"Extend":         func() error { return r.Extend(leased.Receipt, time.Hour) },
		"DeadLetter":     func() error { return r.DeadLetter(leased.Receipt, "x") },
		"AckID":          func() error { return r.AckID("leased") },
		"NackID":         func() error { return r.NackID("leased", 0) },
		"ExtendID":       func() error { return r.ExtendID("leased", time.Hour) },
		"DeadLetterID":   func() error { return r.DeadLetterID("leased", "x") },
		"RequeueExpired": func() error { _, err := r.RequeueExpired(); return err },
		"RequeueDead":    func() error { return r.RequeueDead("dead") },
		"PurgeDead":      func() error { return r.PurgeDead("dead") },
		"RequeueAllDead": func() error { _, err := r.RequeueAllDead(); return err },
		"PurgeAllDead":   func() error { _, err := r.PurgeAllDead(); return err },
	}
	for name, change := range changes {
		require.ErrorIs(t, change(), queue.ErrReadOnly, name)
	}
	require.NoError(t, r.Close())
	require.Equal(t, before, keyContents(t, rdb, "walq:{ro}:*"), "a ReadOnly handle changed the queue")
}

// TestReadOnlySortedChangesNothing: a ReadOnly handle on a sorted queue
// opened past the deadline of another handle's lease reads the queue
// (Stats, DeadValues) and leaves every key as it was: it starts no
// housekeeper, and each call that would change the queue fails with
// queue.ErrReadOnly. A ReadOnly open of a queue that does not exist yet
// creates no key.
func TestReadOnlySortedChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	clock := queuetest.NewClock() // the writer's time stands still; the reader's is now, later
	w, err := redisq.OpenSorted[int64](ctx, rdb, "ro-sorted", &redisq.SortedOptions{
		Options: redisq.Options{ManualRequeue: true, AckTimeout: time.Second, Clock: clock}})
	require.NoError(t, err)
	defer w.Close()
	for i, key := range []string{"dead", "leased", "pending"} {
		require.NoError(t, w.Publish(ctx, int64(i), key, []byte(key)))
	}
	bs, err := w.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("poison"))
	bs, err = w.TryPull(1)
	require.NoError(t, err)
	leased := bs[0]
	before := keyContents(t, rdb, "walq:{ro-sorted}:*")

	r, err := redisq.OpenSorted[int64](ctx, rdb, "ro-sorted", &redisq.SortedOptions{Options: redisq.Options{ReadOnly: true}})
	require.NoError(t, err)
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, [3]int{1, 1, 1}, [3]int{st.SortedPending, st.SortedBatches, st.SortedDead})
	dead, err := r.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", dead[0].Reason)
	changes := map[string]func() error{
		"Publish":          func() error { return r.Publish(ctx, 9, "x", []byte("x")) },
		"TryPull":          func() error { _, err := r.TryPull(10); return err },
		"Ack":              func() error { return r.Ack(leased.Receipt) },
		"Nack":             func() error { return r.Nack(leased.Receipt, 0) },
		"Extend":           func() error { return r.Extend(leased.Receipt, time.Hour) },
		"DeadLetter":       func() error { return r.DeadLetter(leased.Receipt, "x") },
		"RequeueExpired":   func() error { _, err := r.RequeueExpired(); return err },
		"RequeueDead":      func() error { return r.RequeueDead(dead[0].Seq) },
		"PurgeDead":        func() error { return r.PurgeDead(dead[0].Seq) },
		"RequeueDeadValue": func() error { return r.RequeueDeadValue(dead[0]) },
		"PurgeDeadValue":   func() error { return r.PurgeDeadValue(dead[0]) },
		"RequeueAllDead":   func() error { _, err := r.RequeueAllDead(); return err },
		"PurgeAllDead":     func() error { _, err := r.PurgeAllDead(); return err },
	}
	for name, change := range changes {
		require.ErrorIs(t, change(), queue.ErrReadOnly, name)
	}
	require.NoError(t, r.Close())
	require.Equal(t, before, keyContents(t, rdb, "walq:{ro-sorted}:*"), "a ReadOnly handle changed the queue")

	fresh, err := redisq.OpenWindowed(ctx, rdb, "ro-fresh", &redisq.WindowOptions{Window: time.Minute,
		SortedOptions: redisq.SortedOptions{Options: redisq.Options{ReadOnly: true}}})
	require.NoError(t, err)
	require.Zero(t, fresh.Stats().SortedPending)
	require.NoError(t, fresh.Close())
	n, err := rdb.Exists(ctx, "walq:{ro-fresh}:s:stats", "walq:{ro-fresh}:s:seq").Result()
	require.NoError(t, err)
	require.Zero(t, n, "a ReadOnly open recorded the queue's kind")
}

// keyContents returns what every key matching pattern holds (a string, a
// hash or a sorted set; the encoding and order of a hash, which a read
// may rehash, aside).
func keyContents(t *testing.T, rdb *redis.Client, pattern string) map[string]any {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		switch typ {
		case "string":
			m[k], err = rdb.Get(ctx, k).Result()
		case "hash":
			m[k], err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			m[k], err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		default:
			t.Fatalf("key %s holds a %s", k, typ)
		}
		require.NoError(t, err)
	}
	return m
}

// TestReadOnlyStartsNoHousekeeper: a ReadOnly handle runs no
// housekeeping pass, which it could not run (queue.ErrReadOnly) and
// would log as failing. A housekeeper's first pass runs as it starts,
// before it looks at Close, and Close waits for it: so a handle closed
// with its Logger silent ran none.
func TestReadOnlyStartsNoHousekeeper(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	w, err := redisq.Open(ctx, srv.Client(), "ro-keeper", &redisq.Options{Clock: clock})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Enqueue(ctx, []byte("x"), queue.WithDelay(time.Second))
	require.NoError(t, err)

	var log bytes.Buffer
	r, err := redisq.Open(ctx, srv.Client(), "ro-keeper", &redisq.Options{ReadOnly: true, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Delayed)
	require.NoError(t, r.Close())
	require.Empty(t, log.String(), "the ReadOnly handle ran a housekeeping pass")
}

// TestReadOnlyOnReplica: a ReadOnly handle reads a queue on a read-only
// replica (the writes replicated, the library with them), with Open's
// default checks, where a handle that may write is refused; on a replica
// that lacks this version's library, which it cannot load, the ReadOnly
// Open is refused saying so.
func TestReadOnlyOnReplica(t *testing.T) {
	primary, replica := startPair(t)
	ctx := context.Background()
	rc := replica.Client()
	_, err := redisq.Open(ctx, rc, "rep", &redisq.Options{ReadOnly: true})
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "the replica lacks the library")
	require.ErrorContains(t, err, "replica")
	require.ErrorContains(t, err, "library")

	w, err := redisq.Open(ctx, patientClient(t, primary), "rep", &redisq.Options{Replicas: 1, WaitTimeout: patientWait})
	require.NoError(t, err)
	defer w.Close()
	for _, id := range []string{"dead", "ready"} {
		_, err = w.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
	}
	m, err := w.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("poison")) // replicated by its WAIT

	r, err := redisq.Open(ctx, rc, "rep", &redisq.Options{ReadOnly: true})
	require.NoError(t, err, "a ReadOnly handle opens on a replica")
	defer r.Close()
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 1}, [2]int64{st.Ready, st.Dead})
	dead, err := r.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", dead[0].Reason)
	_, err = r.TryDequeue()
	require.ErrorIs(t, err, queue.ErrReadOnly)

	_, err = redisq.Open(ctx, rc, "rep", &redisq.Options{TrustServer: true})
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "a handle that may write is refused on a replica")
}

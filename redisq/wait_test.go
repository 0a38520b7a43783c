package redisq_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestWaitersHoldNoConnection: two hundred goroutines block in Dequeue on
// a client with a pool of four connections; messages enqueued through
// another handle reach every one of them, and the pool never grew past
// its size (the waiters hold no connection, and nothing polls). Also with
// the housekeeper's first pass coming after the waiters have blocked, as
// on a loaded machine.
func TestWaitersHoldNoConnection(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late housekeeper=", late), func(t *testing.T) { waitersHoldNoConnection(t, late) })
	}
}

func waitersHoldNoConnection(t *testing.T, lateHousekeeper bool) {
	srv := redistest.Start(t)
	const pool, waiters = 4, 200
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: pool, PoolTimeout: time.Second})
	defer rdb.Close()
	if lateHousekeeper {
		rdb.AddHook(delayOp{op: "housekeep", by: 300 * time.Millisecond})
	}
	// Each waiter asks the server for one message before it blocks (lone
	// Dequeues running at once share a call that asks for one each), and
	// the handle's housekeeper runs its script once (the queue holds no
	// deadline), before or after them; Open's checks ran before: once
	// those calls were made, every script call is a poll.
	scripts := newScriptCounter(map[string]int{"dequeue": waiters, "housekeep": 1})
	rdb.AddHook(scripts)
	ctx := context.Background()
	consumer, err := redisq.Open(ctx, rdb, "waiters", nil)
	require.NoError(t, err)
	defer consumer.Close()
	producer, err := redisq.Open(ctx, srv.Client(), "waiters", nil)
	require.NoError(t, err)
	defer producer.Close()

	var wg sync.WaitGroup
	errc := make(chan error, waiters)
	for range waiters {
		wg.Go(func() {
			m, err := consumer.Dequeue(ctx)
			if err == nil {
				err = m.Ack()
			}
			if err != nil {
				errc <- err
			}
		})
	}
	select {
	case <-scripts.reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the client's script calls, by operation: %v; want %v before every consumer waits", scripts.counts(), scripts.want)
	}
	before := scripts.count()
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, before, scripts.count(), "waiting consumers run no scripts: they do not poll")

	for i := range waiters {
		_, err := producer.Enqueue(ctx, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	waitOrFail(t, &wg, 30*time.Second)
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, int(rdb.PoolStats().TotalConns), pool, "connections of the pool")
	require.Equal(t, uint64(waiters), consumer.Stats().Acked)
}

// scriptCounter is a client hook that counts the scripts the client ran
// (one sent again after NOSCRIPT or a missing function counts once) by
// the library's operation they call (the function's name after its last
// '_', "" for EVAL and EVALSHA), a dequeue as the messages it asked for,
// and closes reached once every operation in want was counted that many
// times.
type scriptCounter struct {
	redistest.Hook
	mu      sync.Mutex
	by      map[string]int // scripts run by operation, dequeues weighed by their max; guarded by mu
	want    map[string]int // counts at which reached is closed; read only
	reached chan struct{}  // closed once every count in want is reached
	closed  bool           // reached is closed; guarded by mu
}

func newScriptCounter(want map[string]int) *scriptCounter {
	c := &scriptCounter{by: map[string]int{}, want: want, reached: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.check()
	return c
}

// count returns the scripts run, dequeues weighed by their max.
func (c *scriptCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.by {
		n += k
	}
	return n
}

// calls returns the scripts run that call op, dequeues weighed by their
// max.
func (c *scriptCounter) calls(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[op]
}

// counts returns a copy of the counts by operation.
func (c *scriptCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.by)
}

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "fcall" || name == "evalsha" || name == "eval") &&
			!redis.HasErrorPrefix(err, "NOSCRIPT") && !strings.Contains(fmt.Sprint(err), "Function not found") {
			c.add(operation(cmd), weight(cmd.Args()))
		}
		return err
	}
}

// ProcessPipelineHook counts nothing: without Options.Replicas a handle
// runs its scripts one by one.
func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *scriptCounter) add(op string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[op] += n
	c.check()
}

// check closes reached once every count in want is reached; c.mu is
// held.
func (c *scriptCounter) check() {
	if c.closed {
		return
	}
	for op, n := range c.want {
		if c.by[op] < n {
			return
		}
	}
	c.closed = true
	close(c.reached)
}

// fcallName returns the name of the library function cmd calls, and
// whether cmd is an FCALL at all.
func fcallName(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if cmd.Name() != "fcall" || len(args) < 2 {
		return "", false
	}
	return fmt.Sprint(args[1]), true
}

// operation is the library's operation a script call runs: its
// function's name after the last '_' for an FCALL, "" for any other; a
// lean function counts as the operation it runs (lease1 as a dequeue).
func operation(cmd redis.Cmder) string {
	name, ok := fcallName(cmd)
	if !ok {
		return ""
	}
	op := name[strings.LastIndex(name, "_")+1:]
	switch op {
	case "enqueue1", "enqueue1w":
		return "enqueue"
	case "lease1":
		return "dequeue"
	case "ack1":
		return "settle"
	}
	return op
}

// delayOp is a client hook that holds the FCALLs of the library's
// operation op for the duration by before sending them, as a loaded
// machine may hold the goroutine that makes them.
type delayOp struct {
	redistest.Hook
	op string
	by time.Duration
}

func (d delayOp) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if operation(cmd) == d.op {
			time.Sleep(d.by)
		}
		return next(ctx, cmd)
	}
}

// weight is how much a script call counts: for the ack queue's dequeue
// and lease1 functions the messages it asks for (dequeue's sixth
// argument after the keys; lease1's tokens, its arguments from the
// fourth), 1 for any other.
func weight(args []any) int {
	name, _ := args[1].(string)
	if len(args) < 3 {
		return 1
	}
	keys, _ := strconv.Atoi(fmt.Sprint(args[2]))
	switch {
	case strings.HasSuffix(name, "_lease1") && len(args) > 3+keys+3:
		return len(args) - (3 + keys + 3)
	case !strings.HasSuffix(name, "_dequeue") || len(args) <= 3+keys+5:
		return 1
	}
	n, err := strconv.Atoi(fmt.Sprint(args[3+keys+5]))
	if err != nil {
		return 1
	}
	return n
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("consumers did not finish")
	}
}

// TestWakeAcrossHandles: a consumer blocked on one handle wakes when
// another handle, on another client, nacks a message or when a delayed
// message falls due through the other handle's housekeeper.
func TestWakeAcrossHandles(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, err := redisq.Open(ctx, srv.Client(), "across", nil)
	require.NoError(t, err)
	defer a.Close()
	b, err := redisq.Open(ctx, srv.Client(), "across", nil)
	require.NoError(t, err)
	defer b.Close()

	_, err = b.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	m, err := b.TryDequeue()
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		m2, err := a.Dequeue(ctx)
		if err == nil && m2.Deliveries != 2 {
			err = fmt.Errorf("deliveries %d, want 2", m2.Deliveries)
		}
		if err == nil {
			err = m2.Ack()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, m.Nack(0))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a nack through another handle did not wake the consumer")
	}

	go func() {
		m2, err := a.Dequeue(ctx)
		if err == nil {
			err = m2.Ack()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_, err = b.Enqueue(ctx, []byte("later"), queue.WithDelay(300*time.Millisecond))
	require.NoError(t, err)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a delay falling due did not wake the consumer on another handle")
	}
}

// TestWakeOncePerRun: a run of enqueues that no consumer waits for
// publishes once, not once per message; consumers blocked on two handles
// before a run of enqueues from a third all get a message, though the
// run is announced once (each woken consumer that leases wakes the next).
func TestWakeOncePerRun(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	producer, err := redisq.Open(ctx, srv.Client(), "run", nil)
	require.NoError(t, err)
	defer producer.Close()

	require.NoError(t, srv.Client().ConfigResetStat(ctx).Err())
	for range 50 {
		_, err := producer.Enqueue(ctx, []byte("x"))
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), publishes(t, srv), "50 enqueues with no consumer waiting")
	for range 50 {
		m, err := producer.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}

	const handles, each = 2, 3
	// Every consumer's empty look and each housekeeper's first pass: then
	// every consumer waits.
	asks := newScriptCounter(map[string]int{"dequeue": handles * each, "housekeep": handles})
	var wg sync.WaitGroup
	errc := make(chan error, handles*each)
	for range handles {
		rdb := srv.Client()
		rdb.AddHook(asks)
		c, err := redisq.Open(ctx, rdb, "run", nil)
		require.NoError(t, err)
		defer c.Close()
		for range each {
			wg.Go(func() {
				m, err := c.Dequeue(ctx)
				if err == nil {
					err = m.Ack()
				}
				if err != nil {
					errc <- err
				}
			})
		}
	}
	select {
	case <-asks.reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the clients' script calls, by operation: %v; want %v before every consumer waits", asks.counts(), asks.want)
	}
	for range handles * each {
		_, err := producer.Enqueue(ctx, []byte("y"))
		require.NoError(t, err)
	}
	waitOrFail(t, &wg, 30*time.Second)
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.Equal(t, int64(0), producer.Stats().Ready)
}

// publishes returns how many PUBLISH commands the server ran since its
// statistics were reset.
func publishes(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Client().Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_publish:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// sortedForm opens one form of sorted queue (sorted or windowed, with
// SingleFlight) on rdb: its handle for pulls, settles and listings, and
// its publish of value n under key.
type sortedForm struct {
	name string
	open func(t *testing.T, rdb redis.UniversalClient, queueName string, o redisq.Options) (*redisq.Sorted[time.Time], func(ctx context.Context, n int64, key string, payload []byte) error)
}

// testWindow is the window of the windowed queues of the tests that run
// both forms.
const testWindow = 10 * time.Millisecond

// sortedForms are a sorted queue of time sort keys (value n at n seconds
// past the epoch) and a windowed queue of testWindow, both
// single-flight.
var sortedForms = []sortedForm{
	{"sorted", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (*redisq.Sorted[time.Time], func(context.Context, int64, string, []byte) error) {
		t.Helper()
		s, err := redisq.OpenSorted[time.Time](context.Background(), rdb, name, &redisq.SortedOptions{Options: o, SingleFlight: true})
		require.NoError(t, err)
		return s, func(ctx context.Context, n int64, key string, p []byte) error {
			return s.Publish(ctx, time.Unix(n, 0), key, p)
		}
	}},
	{"windowed", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (*redisq.Sorted[time.Time], func(context.Context, int64, string, []byte) error) {
		t.Helper()
		w, err := redisq.OpenWindowed(context.Background(), rdb, name,
			&redisq.WindowOptions{SortedOptions: redisq.SortedOptions{Options: o, SingleFlight: true}, Window: testWindow})
		require.NoError(t, err)
		return w.Sorted, func(ctx context.Context, _ int64, key string, p []byte) error { return w.Publish(ctx, key, p) }
	}},
}

// leaseOracle keeps, from the callers' side alone, what a sorted queue's
// calls returned: values are named by their payloads, unique per
// publish.
type leaseOracle struct {
	mu        sync.Mutex
	published map[string]string // payload -> key, for each Publish that returned nil
	acked     map[string]bool   // the Ack of its batch returned nil
	dead      map[string]bool   // the DeadLetter of its batch returned nil
	tried     map[string]bool   // an ack or dead-letter of its batch was sent (its outcome unknown when it failed)
	liveKey   map[string]bool   // keys of batches pulled and not yet handed to a settle
	liveVal   map[string]bool   // the values of those batches
	twice     []string          // what a pull returned while it was live
	pulls     atomic.Int64      // batches pulled
}

func newLeaseOracle() *leaseOracle {
	return &leaseOracle{published: map[string]string{}, acked: map[string]bool{}, dead: map[string]bool{},
		tried: map[string]bool{}, liveKey: map[string]bool{}, liveVal: map[string]bool{}}
}

// take records a pulled batch as live, and notes a key or value that
// was live already: leased twice at once. A consumer releases a batch
// before its settle is sent, so one settled on the server is never live.
func (o *leaseOracle) take(b *queue.Batch[time.Time]) {
	o.pulls.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.liveKey[b.Key] {
		o.twice = append(o.twice, "key "+b.Key)
	}
	o.liveKey[b.Key] = true
	for _, v := range b.Values {
		if o.liveVal[string(v.Payload)] {
			o.twice = append(o.twice, "value "+string(v.Payload))
		}
		o.liveVal[string(v.Payload)] = true
	}
}

// release records that a settle of b is about to be sent; tried tells
// that the settle may take its values out of the queue (an ack or a
// dead-letter).
func (o *leaseOracle) release(b *queue.Batch[time.Time], tried bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.liveKey, b.Key)
	for _, v := range b.Values {
		delete(o.liveVal, string(v.Payload))
		if tried {
			o.tried[string(v.Payload)] = true
		}
	}
}

// settled records the values of b in m (acked or dead) after a settle
// that returned nil.
func (o *leaseOracle) settled(b *queue.Batch[time.Time], m map[string]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range b.Values {
		m[string(v.Payload)] = true
	}
}

// consume pulls from s until ctx ends: a batch whose first value is on
// its first delivery and whose number ends in 0 is nacked, one ending
// in 1 dead-lettered, the others acked. A settle that fails otherwise
// than with ErrLeaseLost (the server is down) is sent again until it
// returns or ctx ends.
func (o *leaseOracle) consume(ctx context.Context, s *redisq.Sorted[time.Time]) {
	for ctx.Err() == nil {
		bs, err := s.Pull(ctx, 1) // one key: a lost reply strands at most one per consumer
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		for _, b := range bs {
			o.take(b)
			time.Sleep(time.Millisecond) // holds the lease while others pull
			n, _ := strconv.Atoi(string(b.Values[0].Payload[1:]))
			switch {
			case n%10 == 0 && b.Values[0].Deliveries == 1:
				o.release(b, false)
				_ = retry(ctx, func() error { return b.Nack(0) })
			case n%10 == 1:
				o.release(b, true)
				if retry(ctx, func() error { return b.DeadLetter("poison") }) == nil {
					o.settled(b, o.dead)
				}
			default:
				o.release(b, true)
				if retry(ctx, b.Ack) == nil {
					o.settled(b, o.acked)
				}
			}
		}
	}
}

// retry calls settle until it returns nil or ErrLeaseLost (an earlier
// call may have settled), or ctx ends.
func retry(ctx context.Context, settle func() error) error {
	for {
		err := settle()
		if err == nil || errors.Is(err, queue.ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSortedKillServerUnderTraffic kills redis-server (SIGKILL,
// appendfsync always) while producers publish and single-flight
// consumers pull, ack, nack and dead-letter, for a sorted and a windowed
// queue, restarts it on its files and lets the same handles go on. No
// key and no value is leased to two consumers at once, before the kill
// or after it (a lease taken before it holds); at the end no publish
// that returned is lost, no ack or dead-letter that returned is undone,
// every value dead-lettered is listed under its key with its payload,
// and a drain delivers each value left once.
func TestSortedKillServerUnderTraffic(t *testing.T) {
	for _, f := range sortedForms {
		t.Run(f.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			defer rdb.Close()
			o := newLeaseOracle()
			s, publish := f.open(t, rdb, "traffic", redisq.Options{AckTimeout: time.Minute, OpTimeout: time.Second})
			ctx, cancel := context.WithCancel(context.Background())
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { // producer: the payload is known before the call
					for ctx.Err() == nil {
						n := next.Add(1)
						p := fmt.Sprint("v", n)
						key := keyOf(p)
						if publish(ctx, n, key, []byte(p)) == nil {
							o.mu.Lock()
							o.published[p] = key
							o.mu.Unlock()
						}
					}
				})
				wg.Go(func() { o.consume(ctx, s) })
			}
			time.Sleep(1200 * time.Millisecond)
			srv.Kill()
			time.Sleep(100 * time.Millisecond) // calls in flight fail
			srv.Restart()
			before := o.pulls.Load()
			time.Sleep(800 * time.Millisecond) // the same handles go on
			cancel()
			wg.Wait()
			_ = s.Close()
			require.Greater(t, o.pulls.Load(), before, "pulls after the restart")

			later, _ := f.open(t, rdb, "traffic", redisq.Options{Clock: &shiftedClock{d: time.Hour}, ManualRequeue: true})
			defer later.Close()
			_, err := later.RequeueExpired() // every lease of the killed server's consumers has run out
			require.NoError(t, err)
			left := drainSorted(t, later)
			deadKey := map[string]string{}
			ds, err := later.DeadValues(0, 0)
			require.NoError(t, err)
			for _, d := range ds {
				require.Equal(t, "poison", d.Reason)
				deadKey[string(d.Payload)] = d.Key
			}
			o.check(t, left, deadKey)
		})
	}
}

// keyOf is the key value vN is published under.
func keyOf(p string) string {
	n, _ := strconv.Atoi(p[1:])
	return fmt.Sprint("k", n%4)
}

// drainSorted pulls and acks every value of s, and returns how many
// times each payload was pulled.
func drainSorted(t *testing.T, s *redisq.Sorted[time.Time]) map[string]int {
	t.Helper()
	left := map[string]int{}
	for {
		bs, err := s.TryPull(1000)
		if errors.Is(err, queue.ErrEmpty) {
			return left
		}
		require.NoError(t, err)
		for _, b := range bs {
			for _, v := range b.Values {
				left[string(v.Payload)]++
			}
			require.NoError(t, b.Ack())
		}
	}
}

// check compares what the restarted server holds (left: the drain's
// values; deadKey: each dead value's key by payload) with what the calls
// before the kill returned.
func (o *leaseOracle) check(t *testing.T, left map[string]int, deadKey map[string]string) {
	t.Helper()
	require.NotEmpty(t, o.published)
	require.NotEmpty(t, o.acked)
	require.NotEmpty(t, o.dead)
	var lost, undone, deadLost, twice []string
	for p := range o.published {
		_, isDead := deadKey[p]
		if left[p] == 0 && !isDead && !o.tried[p] {
			lost = append(lost, p)
		}
	}
	for p := range o.acked {
		if _, isDead := deadKey[p]; left[p] > 0 || isDead {
			undone = append(undone, p)
		}
	}
	for p := range o.dead {
		if k, ok := deadKey[p]; !ok || k != keyOf(p) || left[p] > 0 {
			deadLost = append(deadLost, p)
		}
	}
	for p, n := range left {
		if n > 1 {
			twice = append(twice, p)
		}
	}
	t.Logf("returned: %d publishes, %d values acked, %d dead-lettered; after the restart %d values left, %d dead",
		len(o.published), len(o.acked), len(o.dead), len(left), len(deadKey))
	require.Empty(t, o.twice, "leased to two consumers at once")
	require.Empty(t, lost, "acknowledged publishes lost")
	require.Empty(t, undone, "acknowledged acks undone")
	require.Empty(t, deadLost, "acknowledged dead-letters lost, or listed under another key")
	require.Empty(t, twice, "values delivered twice by the drain")
}

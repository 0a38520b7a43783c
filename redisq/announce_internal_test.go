package redisq

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLeaseAnnouncedAfterPassedDeadline: a housekeeper armed for the
// announced lease deadline passes at that deadline, finds no lease and
// sleeps; a dequeue whose clock still had that deadline ahead, run on the
// server just after the pass, must announce its own lease, or no
// housekeeper would end it before its idle recheck.
func TestLeaseAnnouncedAfterPassedDeadline(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	const ackTimeout = 2 * time.Second // the redelivered leases must outlive a loaded machine's Ack
	q, err := Open(ctx, srv.Client(), "passed", &Options{Clock: clock, AckTimeout: ackTimeout, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	sub := subscribe(t, srv.Client(), q.wake)
	for _, p := range []string{"a", "b"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	t0 := clock.Now()
	a := leaseAt(t, q, t0, 1)
	require.NoError(t, a[0].Ack())
	waitFor(t, sub, announcement(t0.Add(ackTimeout)))

	t1 := t0.Add(ackTimeout)
	_, err = q.run(ctx, fnHousekeep, t1, "1", 1000)
	require.NoError(t, err)
	behind := t1.Add(-time.Microsecond)
	b := leaseAt(t, q, behind, 1)
	require.Equal(t, "b", string(b[0].Payload))
	waitFor(t, sub, announcement(behind.Add(ackTimeout)))
}

// TestDelayedNackAnnounced: a nack with a delay announces the message's
// due time, so that consumers blocked meanwhile get it when it is due
// rather than at a housekeeper's idle recheck.
func TestDelayedNackAnnounced(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, srv.Client(), "nack-due", &Options{Clock: clock, AckTimeout: time.Hour, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	sub := subscribe(t, srv.Client(), q.wake)
	_, err = q.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	t0 := clock.Now()
	m := leaseAt(t, q, t0, 1)
	require.NoError(t, m[0].Nack(5*time.Second))
	waitFor(t, sub, announcement(t0.Add(5*time.Second)))
}

// TestBuriedDelayedNackAnnouncesNothing: a delayed nack of a message
// whose record it buries (a delivery count garbled while leased) adds no
// delayed message, so it announces no due time: a housekeeper woken for
// one would look for nothing. What the nack published reaches the
// subscriber before a marker published after it.
func TestBuriedDelayedNackAnnouncesNothing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, srv.Client(), "buried-nack", &Options{ManualRequeue: true, Clock: noTimers{queuetest.NewClock()}})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	raw, err := q.rdb.HGet(ctx, q.keys[1], "1").Result()
	require.NoError(t, err)
	garbled := regexp.MustCompile(`^([01]):\d+:`).ReplaceAllString(raw, "${1}:999999999999999:")
	require.NoError(t, q.rdb.HSet(ctx, q.keys[1], "1", garbled).Err())
	sub := subscribe(t, srv.Client(), q.wake)

	require.NoError(t, m.Nack(time.Hour))
	require.NoError(t, srv.Client().Publish(ctx, q.wake, "marker").Err())
	select {
	case msg := <-sub:
		require.Equal(t, "marker", msg.Payload, "the buried message's nack published")
	case <-time.After(10 * time.Second):
		t.Fatal("the marker never arrived")
	}
	dead, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "corrupt record: unreadable", dead[0].Reason)
}

// subscribe listens to the queue's wake channel with a client of its own.
func subscribe(t *testing.T, rdb redis.UniversalClient, channel string) <-chan *redis.Message {
	t.Helper()
	ps := rdb.Subscribe(context.Background(), channel)
	_, err := ps.Receive(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ps.Close() })
	return ps.Channel()
}

// announcement is the wake-channel message that announces a deadline.
func announcement(at time.Time) string {
	return "t" + strconv.FormatInt(at.UnixMicro(), 10)
}

// waitFor reads the channel until want arrives, failing after a while.
func waitFor(t *testing.T, ch <-chan *redis.Message, want string) {
	t.Helper()
	var seen []string
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-ch:
			if m.Payload == want {
				return
			}
			seen = append(seen, m.Payload)
		case <-timeout:
			t.Fatalf("no %q on the wake channel; saw %q", want, seen)
		}
	}
}

// TestManyLeaseAnnounced: a batch, and lone Dequeues gathered into one
// call, announce their lease's deadline when no announced deadline lies
// ahead ('#t' absent), so that a housekeeper armed later (here for its
// idle recheck) ends the leases at that deadline.
func TestManyLeaseAnnounced(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const ackTimeout = 2 * time.Second // the redelivered leases must outlive a loaded machine's Ack
	takes := []struct {
		name string
		take func(t *testing.T, q *Queue) int
	}{
		{"batch", func(t *testing.T, q *Queue) int {
			ms, err := q.DequeueBatch(ctx, 2)
			require.NoError(t, err)
			return len(ms)
		}},
		{"gathered", func(t *testing.T, q *Queue) int {
			reqs := []*leaseReq{{p: newPresence(ctx)}, {p: newPresence(ctx)}}
			n := 0
			for i, err := range q.leaseEach(reqs) {
				require.NoError(t, err)
				if reqs[i].m != nil {
					n++
				}
			}
			return n
		}},
	}
	for _, tk := range takes {
		t.Run(tk.name, func(t *testing.T) {
			q, err := Open(ctx, srv.Client(), "announce-"+tk.name, &Options{AckTimeout: ackTimeout})
			require.NoError(t, err)
			defer q.Close()
			sub := subscribe(t, srv.Client(), q.wake)
			_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
			require.NoError(t, err)
			ann, err := srv.Client().HExists(ctx, q.keys[1], "#t").Result()
			require.NoError(t, err)
			require.False(t, ann, "no deadline announced yet")

			leased := time.Now()
			require.Equal(t, 2, tk.take(t, q))
			waitForPrefix(t, sub, "t")
			wait, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			for range 2 {
				m, err := q.Dequeue(wait)
				require.NoError(t, err, "the leases did not run out within 10s")
				require.Equal(t, 2, m.Deliveries)
				require.NoError(t, m.Ack())
			}
			require.Less(t, time.Since(leased), 10*time.Second)
		})
	}
}

// waitForPrefix reads the channel until a message starting with prefix
// arrives, failing after a while.
func waitForPrefix(t *testing.T, ch <-chan *redis.Message, prefix string) {
	t.Helper()
	var seen []string
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-ch:
			if strings.HasPrefix(m.Payload, prefix) {
				return
			}
			seen = append(seen, m.Payload)
		case <-timeout:
			t.Fatalf("no %q… on the wake channel; saw %q", prefix, seen)
		}
	}
}

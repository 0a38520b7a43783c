package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// settleRace records what the consumers of a settle race were told. Every
// delivery of a message (a value of a sorted queue) has its own count, so
// the deliveries of one message are told apart by Deliveries alone.
type settleRace struct {
	lease time.Duration // the queue's AckTimeout

	mu      sync.Mutex
	seen    map[string]*raceDelivery // "name/deliveries" -> that delivery
	last    map[string]int           // name -> highest delivery count handed out
	acked   map[string]int           // name -> the delivery count whose ack returned nil
	refused int                      // settles that returned ErrLeaseLost
}

// raceDelivery is one delivery of a message.
type raceDelivery struct {
	at     time.Time // its DeliveredAt (PulledAt), the queue's clock
	until  time.Time // its lease runs at least until then: AckTimeout from at, or d from before an Extend(d) that returned nil
	nacked bool      // a nack of it returned nil: the message was given back before its deadline
}

func newSettleRace(lease time.Duration) *settleRace {
	return &settleRace{lease: lease, seen: map[string]*raceDelivery{}, last: map[string]int{}, acked: map[string]int{}}
}

func deliveryKey(name string, n int) string { return fmt.Sprintf("%s/%d", name, n) }

// delivered notes a delivery made at at; a count handed out twice means
// two consumers were given the same delivery.
func (r *settleRace) delivered(t *testing.T, name string, n int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := deliveryKey(name, n)
	if r.seen[k] != nil {
		t.Errorf("delivery %s handed out twice", k)
	}
	r.seen[k] = &raceDelivery{at: at, until: at.Add(r.lease)}
	r.last[name] = max(r.last[name], n)
}

// settled notes the outcome of a settle of delivery ns[i] of names[i]
// (none for an extend of a message it need not judge): an ack, a nack,
// or an extend by d made no earlier than from.
func (r *settleRace) settled(t *testing.T, op queue.SettleOp, err error, names []string, ns []int, from time.Time, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, queue.ErrLeaseLost):
		r.refused++
		return
	case err != nil:
		t.Error(err)
		return
	}
	for i, name := range names {
		dl := r.seen[deliveryKey(name, ns[i])]
		switch op {
		case queue.SettleExtend:
			dl.until = from.Add(d) // an extend sets the deadline, later or sooner
		case queue.SettleNack:
			dl.nacked = true
		case queue.SettleAck:
			if n, ok := r.acked[name]; ok {
				t.Errorf("%s: acked by delivery %d and again by %d", name, n, ns[i])
			}
			r.acked[name] = ns[i]
		}
	}
}

// check holds the record to what a lease promises: no delivery began
// before the lease of the one before it ran out (unless that one was
// nacked), an ack that returned nil was the message's last delivery, and
// every message was acked once.
func (r *settleRace) check(t *testing.T, total int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, n := range r.acked {
		if r.last[name] != n {
			t.Errorf("%s: ack of delivery %d returned nil, delivery %d was handed out", name, n, r.last[name])
		}
	}
	for name, last := range r.last {
		for n := 1; n < last; n++ {
			prev, next := r.seen[deliveryKey(name, n)], r.seen[deliveryKey(name, n+1)]
			if prev == nil || next == nil || prev.nacked {
				continue // a delivery a nack gave back, or not seen whole (the race stopped)
			}
			if early := prev.until.Sub(next.at); early > 0 {
				t.Errorf("%s: delivery %d began %v before the lease of delivery %d ran out", name, n+1, early, n)
			}
		}
	}
	require.Len(t, r.acked, total, "messages acked")
	t.Logf("%d messages, %d deliveries, %d settles refused", total, len(r.seen), r.refused)
}

func (r *settleRace) done(total int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acked) == total
}

// settleDelay sleeps 0 to 4 ms, around the 3 ms leases of the races.
func settleDelay(rng *rand.Rand) { time.Sleep(time.Duration(rng.Intn(4000)) * time.Microsecond) }

// waitSettled waits until every message was acked or 30 s passed, then
// stops the race.
func waitSettled(r *settleRace, total int, cancel context.CancelFunc, wg *sync.WaitGroup) {
	for end := time.Now().Add(30 * time.Second); !r.done(total) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
}

// TestSettleRacesExpiry runs consumers whose acks, nacks and extends race
// the expiry of their 3 ms leases, beside a producer and compactions: no
// delivery is handed to two consumers or begins before the lease of the
// one before it ran out, an ack that returns nil is of the
// message's last delivery, each message is acked once, with its own
// payload. It fails when the housekeeper ends a lease before its deadline
// (requeueSome), or when a settle is not held to its own delivery
// (state.leased and leasedBy).
func TestSettleRacesExpiry(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{AckTimeout: 3 * time.Millisecond, SegmentSize: 16 << 10, SnapshotBytes: 32 << 10, MaxDeliveries: -1})
	defer q.Close()
	total := 500
	if raceEnabled {
		total = 200
	}
	r := newSettleRace(3 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < total; i++ {
			id := fmt.Sprintf("m%d", i)
			if _, err := q.Enqueue(ctx, []byte(id), queue.WithID(id)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			for {
				m, err := q.Dequeue(ctx)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					return
				}
				if string(m.Payload) != m.ID {
					t.Errorf("message %s has payload %q", m.ID, m.Payload)
				}
				names, ns := []string{m.ID}, []int{m.Deliveries}
				r.delivered(t, m.ID, m.Deliveries, m.DeliveredAt)
				settleDelay(rng)
				if rng.Intn(3) == 0 {
					d, from := time.Duration(1+rng.Intn(4))*time.Millisecond, time.Now()
					r.settled(t, queue.SettleExtend, m.Extend(d), names, ns, from, d)
					settleDelay(rng)
				}
				switch rng.Intn(5) {
				case 0:
					r.settled(t, queue.SettleNack, m.Nack(0), names, ns, time.Time{}, 0)
				case 1:
					r.settled(t, queue.SettleAck, q.AckBatch(m.Receipt), names, ns, time.Time{}, 0)
				default:
					r.settled(t, queue.SettleAck, m.Ack(), names, ns, time.Time{}, 0)
				}
			}
		}(rand.New(rand.NewSource(int64(c))))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := q.Compact(); err != nil {
				t.Error(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitSettled(r, total, cancel, &wg)
	r.check(t, total)
}

// TestSortedSettleRacesExpiry is TestSettleRacesExpiry for a sorted queue,
// with and without SingleFlight: pulled batches whose acks, nacks and
// extends race the expiry of their 3 ms leases, beside a publisher and
// compactions. No value's delivery is in two batches, no batch is pulled
// again before the lease of the one before it ran out, an ack that returns
// nil is of each of its values' last delivery, each value is acked once.
// It fails when the housekeeper returns a batch before its deadline
// (expireBatchesLocked).
func TestSortedSettleRacesExpiry(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("SingleFlight=%v", single), func(t *testing.T) {
			s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{
				Options:      queue.Options{AckTimeout: 3 * time.Millisecond, SegmentSize: 16 << 10, SnapshotBytes: 32 << 10, MaxDeliveries: -1},
				SingleFlight: single,
			})
			require.NoError(t, err)
			defer s.Close()
			total := 500
			if raceEnabled {
				total = 200
			}
			r := newSettleRace(3 * time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(99))
				for i := 0; i < total; i++ {
					key := fmt.Sprintf("k%d", rng.Intn(20))
					if err := s.Publish(ctx, int64(rng.Intn(1000)), key, []byte(fmt.Sprintf("%s/v%d", key, i))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			for c := 0; c < 3; c++ {
				wg.Add(1)
				go func(rng *rand.Rand) {
					defer wg.Done()
					for {
						bs, err := s.Pull(ctx, 2)
						if err != nil {
							if !errors.Is(err, context.Canceled) {
								t.Error(err)
							}
							return
						}
						names, ns := make([][]string, len(bs)), make([][]int, len(bs))
						for j, b := range bs {
							for _, v := range b.Values {
								if !strings.HasPrefix(string(v.Payload), b.Key+"/") {
									t.Errorf("batch of %s holds %q", b.Key, v.Payload)
								}
								names[j], ns[j] = append(names[j], string(v.Payload)), append(ns[j], v.Deliveries)
								r.delivered(t, string(v.Payload), v.Deliveries, b.PulledAt)
							}
						}
						for j, b := range bs {
							settleDelay(rng)
							if rng.Intn(3) == 0 {
								d, from := time.Duration(1+rng.Intn(4))*time.Millisecond, time.Now()
								r.settled(t, queue.SettleExtend, b.Extend(d), names[j], ns[j], from, d)
								settleDelay(rng)
							}
							if rng.Intn(5) == 0 {
								r.settled(t, queue.SettleNack, b.Nack(0), names[j], ns[j], time.Time{}, 0)
							} else {
								r.settled(t, queue.SettleAck, b.Ack(), names[j], ns[j], time.Time{}, 0)
							}
						}
					}
				}(rand.New(rand.NewSource(int64(c))))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if err := s.Compact(); err != nil {
						t.Error(err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			waitSettled(r, total, cancel, &wg)
			r.check(t, total)
		})
	}
}

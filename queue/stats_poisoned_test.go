package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// poisonedCase is one kind of queue and one way of adding to it: open
// opens the kind in dir on fs (nil: the real disk) and, when setup is
// set, adds three and settles one, so that the state is not trivial; add
// is the call under test, which adds n messages or values.
type poisonedCase struct {
	n    int
	open poisonedOpener
}

type poisonedOpener func(t *testing.T, dir string, fs *faultfs.FS, clk *fakeclock.Clock, setup bool) poisonedQueue

// poisonedQueue is an open queue of a poisonedCase.
type poisonedQueue struct {
	add   func() error
	stats func() queue.Stats
	drain func(t *testing.T) int // delivers and acks all that is deliverable; how many messages or values
	close func() error
}

// liveCount is what Stats counts as live and not dead: messages ready,
// delayed or in flight, and sorted values pending or leased.
func liveCount(s queue.Stats) int64 {
	return s.Ready + s.Delayed + s.InFlight + int64(s.SortedPending) + int64(s.SortedLeased)
}

func poisonedPlain(add func(q *queue.Queue) error) poisonedOpener {
	return func(t *testing.T, dir string, fs *faultfs.FS, clk *fakeclock.Clock, setup bool) poisonedQueue {
		o := &queue.Options{ManualRequeue: true, Clock: clk}
		if fs != nil {
			o.FS = fs
		}
		q := open(t, dir, o)
		for i := range 3 * setupN(setup) {
			enqueue(t, q, fmt.Sprint("old", i))
		}
		if setup {
			require.NoError(t, tryDequeue(t, q).Ack())
		}
		return poisonedQueue{
			add: func() error { return add(q) }, stats: q.Stats, close: q.Close,
			drain: func(t *testing.T) int {
				clk.Advance(time.Hour) // every delay ends
				n := 0
				for {
					m, err := q.TryDequeue()
					if errors.Is(err, queue.ErrEmpty) {
						return n
					}
					require.NoError(t, err)
					require.NoError(t, m.Ack())
					n++
				}
			},
		}
	}
}

func poisonedSorted(windowed bool) poisonedOpener {
	return func(t *testing.T, dir string, fs *faultfs.FS, clk *fakeclock.Clock, setup bool) poisonedQueue {
		o := queue.SortedOptions{Options: queue.Options{ManualRequeue: true, Clock: clk}}
		if fs != nil {
			o.FS = fs
		}
		var s *queue.Sorted[time.Time]
		publish := func(key, v string) error {
			return s.Publish(context.Background(), clk.Now(), key, []byte(v))
		}
		if windowed {
			w, err := queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Minute, SortedOptions: o})
			require.NoError(t, err)
			s = w.Sorted
			publish = func(key, v string) error { return w.Publish(context.Background(), key, []byte(v)) }
		} else {
			var err error
			s, err = queue.OpenSorted[time.Time](dir, &o)
			require.NoError(t, err)
		}
		for i, k := range []string{"a", "b", "b"}[:3*setupN(setup)] {
			require.NoError(t, publish(k, fmt.Sprint("old", i)))
			clk.Advance(time.Second)
		}
		if setup {
			clk.Advance(time.Hour) // every window closes
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.NoError(t, bs[0].Ack())
		}
		return poisonedQueue{
			add: func() error { return publish("c", "new") }, stats: s.Stats, close: s.Close,
			drain: func(t *testing.T) int {
				clk.Advance(time.Hour)
				n := 0
				for {
					bs, err := s.TryPull(100)
					if errors.Is(err, queue.ErrEmpty) {
						return n
					}
					require.NoError(t, err)
					for _, b := range bs {
						n += len(b.Values)
						require.NoError(t, b.Ack())
					}
				}
			},
		}
	}
}

// setupN is 1 when setup is set, else 0.
func setupN(setup bool) int {
	if setup {
		return 1
	}
	return 0
}

var poisonedCases = map[string]poisonedCase{
	"Enqueue": {n: 1, open: poisonedPlain(func(q *queue.Queue) error {
		_, err := q.Enqueue(context.Background(), []byte("new"))
		return err
	})},
	"Enqueue/delayed": {n: 1, open: poisonedPlain(func(q *queue.Queue) error {
		_, err := q.Enqueue(context.Background(), []byte("new"), queue.WithDelay(time.Minute))
		return err
	})},
	"EnqueueBatch": {n: 3, open: poisonedPlain(func(q *queue.Queue) error {
		_, err := q.EnqueueBatch(context.Background(), []queue.Item{{Payload: []byte("n0")},
			{Payload: []byte("n1"), Delay: time.Minute}, {Payload: []byte("n2")}})
		return err
	})},
	"EnqueueAsync": {n: 1, open: poisonedPlain(func(q *queue.Queue) error {
		p, err := q.EnqueueAsync(context.Background(), []byte("new"))
		if err != nil {
			return err
		}
		return p.Wait(context.Background())
	})},
	"sorted/Publish":   {n: 1, open: poisonedSorted(false)},
	"windowed/Publish": {n: 1, open: poisonedSorted(true)},
}

// The counts of a poisoned queue are those of the log as written: an
// enqueue or publish whose write failed is not counted (no reopen
// delivers it), one whose write was made and whose fsync failed is
// (a reopen after the process ended finds it). On every kind of queue and
// every way of adding, Stats before and after Close agree with the
// Stats of a reopen and with what a drain of it delivers.
func TestStatsOfPoisonedLog(t *testing.T) {
	for name, c := range poisonedCases {
		for _, fault := range []string{"write-batch", "fsync"} {
			t.Run(name+"/"+fault, func(t *testing.T) {
				// A dry run finds the call's first operation of the kind.
				fs := faultfs.New(0)
				dry := c.open(t, t.TempDir(), fs, fakeclock.New(), true)
				before := len(fs.Ops())
				require.NoError(t, dry.add())
				at := 0
				for i, op := range fs.Ops()[before:] {
					if op.Kind == fault {
						at = before + i + 1
						break
					}
				}
				require.NotZero(t, at, "the call made no %s", fault)
				require.NoError(t, dry.close())

				dir, clk := t.TempDir(), fakeclock.New()
				fs = faultfs.New(at)
				q := c.open(t, dir, fs, clk, true)
				require.ErrorIs(t, q.add(), faultfs.ErrInjected)
				hit, ok := fs.Hit()
				require.True(t, ok)
				require.Equal(t, fault, hit.Kind)
				poisoned := q.stats()
				require.Error(t, q.close())
				closed := q.stats()
				require.True(t, closed.Closed)

				want := int64(2) // what the setup left
				if fault == "fsync" {
					want += int64(c.n) // written: a reopen finds it
				}
				again := c.open(t, dir, nil, clk, false)
				defer again.close()
				reopened := again.stats()
				for what, s := range map[string]queue.Stats{"poisoned": poisoned, "closed": closed, "reopened": reopened} {
					require.NoError(t, s.CountsErr, "%s: the log reads back", what)
					require.NoError(t, s.OldestErr, "%s: the oldest record reads", what)
					require.Equal(t, want, liveCount(s), "%s: live messages or values", what)
					require.Equal(t, reopened.Enqueued+reopened.Published, s.Enqueued+s.Published, "%s: enqueued or published", what)
					require.Equal(t, reopened.Delayed, s.Delayed, "%s: delayed", what)
					require.Equal(t, reopened.SortedKeys, s.SortedKeys, "%s: sorted keys", what)
					require.Equal(t, reopened.LastLSN, s.LastLSN, "%s: last LSN: the last record written", what)
				}
				require.Equal(t, int(want), again.drain(t), "delivered after the reopen")
			})
		}
	}
}

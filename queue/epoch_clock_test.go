package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// epochClock is a manual clock that starts at the Unix epoch, exactly.
type epochClock struct {
	*fakeclock.Clock
	start time.Time // the fake clock's time that reads as the epoch
}

func newEpochClock() epochClock {
	c := fakeclock.New()
	return epochClock{Clock: c, start: c.Now()}
}

func (c epochClock) Now() time.Time { return time.Unix(0, 0).Add(c.Clock.Now().Sub(c.start)) }

// TestAckAtTheEpoch: a message acked when the queue's clock reads exactly
// the Unix epoch is acked like any other: its id is kept for DedupWindow,
// then forgotten, before and after a reopen that replays the ack. And a
// delivery made at the epoch gives a receipt that names its delivery
// time, so a crash that loses the lease cannot let it settle another
// delivery.
func TestAckAtTheEpoch(t *testing.T) {
	const window = time.Minute
	for _, reopen := range []bool{false, true} {
		dir := t.TempDir()
		clock := newEpochClock()
		opts := &queue.Options{Clock: clock, DedupWindow: window}
		q, err := queue.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(context.Background(), []byte("m"), queue.WithID("a")); err != nil {
			t.Fatal(err)
		}
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatal(err)
		}
		if r := m.Receipt; r.At == 0 {
			t.Errorf("receipt %s of a delivery at the epoch carries no delivery time: it is never checked", r)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(context.Background(), []byte("m"), queue.WithID("a")); !errors.Is(err, queue.ErrDuplicate) {
			t.Errorf("enqueue of id a within the window after its ack: %v, want ErrDuplicate", err)
		}
		if reopen {
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if q, err = queue.Open(dir, opts); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(2 * window)
		if _, err := q.Enqueue(context.Background(), []byte("m"), queue.WithID("a")); err != nil {
			t.Errorf("reopen %v: enqueue of id a, acked at the epoch, %v later (DedupWindow %v): %v", reopen, 2*window, window, err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

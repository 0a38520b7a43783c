package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/faultfs"
)

// RequeueExpired returns once the records that end the leases are as
// durable as the sync mode promises: fsynced under SyncAlways; under
// SyncInterval and SyncNever it makes no fsync of its own.
func TestRequeueExpiredFsyncsOnlyUnderSyncAlways(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      Options
		fsyncs bool
	}{
		{"SyncAlways", Options{}, true},
		{"SyncInterval", Options{Sync: SyncInterval, SyncInterval: time.Hour}, false},
		{"SyncNever", Options{Sync: SyncNever}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := fakeclock.New()
			fs := faultfs.New(0)
			c.o.FS, c.o.Clock, c.o.ManualRequeue = fs, clk, true
			q, err := Open(t.TempDir(), &c.o)
			require.NoError(t, err)
			defer q.Close()
			var m *Message
			held(t, q, &m)
			clk.Advance(time.Hour)
			before := len(fs.Ops())
			n, err := q.RequeueExpired()
			require.NoError(t, err)
			require.Equal(t, 1, n)
			fsyncs := 0
			for _, op := range fs.Ops()[before:] {
				if op.Kind == "fsync" {
					fsyncs++
				}
			}
			if !c.fsyncs {
				require.Zero(t, fsyncs, "RequeueExpired fsynced under %s", c.name)
				return
			}
			require.GreaterOrEqual(t, q.log.DurableLSN(), q.log.LastLSN(),
				"RequeueExpired returned before its record was fsynced")
		})
	}
}

// A consumer asleep on a queue whose only message is leased gets it once
// RequeueExpired ends the lease, though the requeue wakes it only after
// its fsync.
func TestRequeueExpiredWakesConsumerAsleep(t *testing.T) {
	clk := fakeclock.New()
	q, err := Open(t.TempDir(), &Options{Clock: clk, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	var m *Message
	held(t, q, &m)
	looks := 0
	asleep := make(chan struct{})
	q.foundNothing = func() { // under q.mu
		if looks++; looks == dequeueSleeper.looks {
			close(asleep)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *Message, 1)
	go func() {
		m, err := q.Dequeue(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	select {
	case <-asleep:
	case <-time.After(hangBound):
		t.Fatal("the consumer never slept")
	}
	clk.Advance(time.Hour)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	select {
	case r := <-got:
		require.NotNil(t, r)
		require.Equal(t, m.ID, r.ID)
		require.NoError(t, r.Ack())
	case <-time.After(hangBound):
		cancel()
		t.Fatal("the consumer asleep slept through the requeue of the message")
	}
}

// Whichever operation of RequeueExpired fails (its write, its fsync), it
// returns the failure instead of waiting on, and a consumer asleep wakes
// to report it.
func TestRequeueExpiredFailureWakesConsumer(t *testing.T) {
	clk := fakeclock.New()
	var m *Message
	checkWakes(t, dequeueSleeper, Options{Clock: clk, ManualRequeue: true},
		func(q *Queue) { held(t, q, &m) },
		func(q *Queue) error {
			clk.Advance(time.Hour)
			_, err := q.RequeueExpired()
			return err
		})
}

// Close returns while the housekeeper ends an expired lease, whichever
// of the requeue's operations fails: the housekeeper waiting for the
// requeue's commit does not hold Close up for good.
func TestCloseWhileHousekeeperRequeues(t *testing.T) {
	clk := fakeclock.New()
	run := func(failAt int) (before, after int) {
		fs := faultfs.New(failAt)
		q, err := Open(t.TempDir(), &Options{Clock: clk, FS: fs})
		require.NoError(t, err)
		var m *Message
		held(t, q, &m)
		before = len(fs.Ops())
		// The housekeeper's timer fires: it ends the lease, in the state
		// once appended, before the record's write and fsync. The clock
		// moves on at each look, as a timer set from a reading taken
		// before an advance fires only at the next.
		requeued := func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.mu.st.table.Counts().Ready == 1
		}
		for deadline := time.Now().Add(hangBound); !requeued(); time.Sleep(time.Millisecond) {
			require.False(t, time.Now().After(deadline), "the housekeeper never ended the lease")
			clk.Advance(time.Hour)
		}
		if failAt == 0 {
			synced(t, q)
			after = len(fs.Ops())
		}
		closed := make(chan error, 1)
		go func() { closed <- q.Close() }()
		select {
		case err := <-closed:
			if failAt == 0 {
				require.NoError(t, err)
			}
		case <-time.After(hangBound):
			t.Fatalf("Close hung with operation %d failing", failAt)
		}
		return before, after
	}
	before, after := run(0)
	require.Greater(t, after, before, "the housekeeper wrote nothing")
	for n := before + 1; n <= after; n++ {
		run(n)
	}
}

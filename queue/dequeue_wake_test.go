package queue

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
)

// A consumer that found nothing counts itself as a waiter only after that
// first look. A message written in between, whose producer then sees no
// waiter and wakes nobody, must still be found: the consumer looks again
// once counted. The seam, run in that gap, appends and writes an enqueue
// record there and wakes nobody, every round.
func TestDequeueFindsWriteBeforeItCounts(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{Sync: SyncNever})
	require.NoError(t, err)
	defer q.Close()
	var round int
	produced := false
	q.foundNothing = func() { // under q.mu
		if produced {
			return
		}
		produced = true
		r := record{Op: opEnqueue, ID: "m", At: q.now(), Payload: []byte{byte(round)}}
		_, err := q.appendLocked(&r, nil)
		require.NoError(t, err)
		require.NoError(t, q.log.Flush())
	}
	ctx := context.Background()
	for round = range 50 {
		q.mu.Lock()
		produced = false
		q.mu.Unlock()
		got := make(chan *Message, 1)
		go func() {
			m, err := q.Dequeue(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		select {
		case m := <-got:
			require.Equal(t, []byte{byte(round)}, m.Payload)
			require.NoError(t, m.Ack())
		case <-time.After(5 * time.Second):
			q.Close() // wakes the consumer
			t.Fatalf("round %d: the consumer slept through a message written before it counted itself", round)
		}
	}
}

// woken is what one run of a wake test saw.
type woken struct {
	actErr, sleeperErr error
	poisoned           error // the log's error after act; nil when act left it healthy
	laterErr           error // what a look made after the poison returned; nil when healthy
	ops                int   // operations counted from the consumer's sleep to act's return
}

// hangBound bounds each wait of a wake test, so that a consumer that
// neither sleeps nor returns fails the test instead of hanging it.
const hangBound = 30 * time.Second

// sleeper is a consumer of one kind: deliver blocks until it has a
// delivery, which it settles, or fails; looks is how many times it calls
// foundNothing before it sleeps.
type sleeper struct {
	open    func(t *testing.T, fs *faultfs.FS, o Options) *Queue
	deliver func(ctx context.Context, q *Queue) error
	looks   int
}

var dequeueSleeper = sleeper{
	open: func(t *testing.T, fs *faultfs.FS, o Options) *Queue {
		o.FS = fs
		q, err := Open(t.TempDir(), &o)
		require.NoError(t, err)
		return q
	},
	deliver: func(ctx context.Context, q *Queue) error {
		m, err := q.Dequeue(ctx)
		if err == nil {
			err = m.Ack()
		}
		return err
	},
	looks: 2, // dequeue looks once more after it counts itself a waiter
}

var pullSleeper = sleeper{
	open: func(t *testing.T, fs *faultfs.FS, o Options) *Queue {
		o.FS = fs
		s, err := OpenSorted[int64](t.TempDir(), &SortedOptions{Options: o})
		require.NoError(t, err)
		return s.q
	},
	deliver: func(ctx context.Context, q *Queue) error {
		bs, err := (&Sorted[int64]{q: q}).Pull(ctx, 10)
		for _, b := range bs {
			err = joinErrors(err, b.Ack())
		}
		return err
	},
	looks: 1,
}

// wakeRun opens a queue of k's kind with o, runs setup, puts a consumer
// to sleep on it, then runs act on a file system that fails the failAt-th
// operation counted from the consumer's sleep (0: none). The operations
// are numbered from there, not from the queue's Open: how many the setup
// makes varies with the clock (see heldSynced), and a failure in the
// setup would test a consumer that never slept.
func wakeRun(t *testing.T, k sleeper, o Options, failAt int, setup func(*Queue), act func(*Queue) error) woken {
	fs := faultfs.New(0)
	q := k.open(t, fs, o)
	defer q.Close()
	setup(q)
	looks := 0
	asleep := make(chan struct{})
	q.foundNothing = func() { // under q.mu, at each look that found nothing
		if looks++; looks == k.looks {
			close(asleep)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- k.deliver(ctx, q) }()
	var w woken
	select {
	case <-asleep:
	case err := <-got:
		t.Fatalf("the consumer returned (%v) at its first look on a healthy log", err)
	case <-time.After(hangBound):
		t.Fatal("the consumer neither slept nor returned")
	}
	before := len(fs.Ops())
	if failAt > 0 {
		fs.FailAfter(failAt)
	}
	w.actErr = act(q)
	w.ops = len(fs.Ops()) - before
	if w.poisoned = q.log.Err(); w.poisoned == nil {
		cancel() // the consumer may have nothing to wake for: end its wait
	}
	select {
	case w.sleeperErr = <-got:
	case <-time.After(hangBound):
		t.Fatal("the consumer never returned")
	}
	w.laterErr = lookAgain(ctx, t, k, q, w.poisoned)
	return w
}

// lookAgain returns what a consumer that looks after the log was poisoned
// gets (nil when it was not): the poison at once, not a sleep until ctx
// ends.
func lookAgain(ctx context.Context, t *testing.T, k sleeper, q *Queue, poisoned error) error {
	if poisoned == nil {
		return nil
	}
	got := make(chan error, 1)
	go func() { got <- k.deliver(ctx, q) }()
	select {
	case err := <-got:
		return err
	case <-time.After(hangBound):
		t.Fatal("a consumer that looked after the poison never returned")
		return nil
	}
}

// checkWakes fails, one run at a time, each operation act makes (counted
// by a run on a healthy disk), and checks that whenever the failure
// poisoned the log the consumer asleep woke to report it. An operation
// counted that is not act's own (the fsync of a witness written after
// act's fsync, which the tick of SyncInterval makes before act returns or
// after) may come after act in a faulty run: that run leaves the log
// healthy and checks nothing more.
func checkWakes(t *testing.T, k sleeper, o Options, setup func(*Queue), act func(*Queue) error) {
	dry := wakeRun(t, k, o, 0, setup, act)
	require.NoError(t, dry.actErr)
	poisonings := 0
	for n := 1; n <= dry.ops; n++ {
		w := wakeRun(t, k, o, n, setup, act)
		if w.poisoned == nil {
			continue
		}
		poisonings++
		require.NotErrorIs(t, w.sleeperErr, context.DeadlineExceeded,
			"operation %d poisoned the log (%v), but the consumer asleep slept on", n, w.poisoned)
		require.ErrorIs(t, w.sleeperErr, faultfs.ErrInjected, "operation %d", n)
		require.ErrorIs(t, w.laterErr, faultfs.ErrInjected,
			"operation %d poisoned the log; a consumer that looks after it must get it at once", n)
	}
	require.NotZero(t, poisonings, "no operation poisoned the log")
}

// held leases one message for the act to settle.
func held(t *testing.T, q *Queue, m **Message) {
	_, err := q.Enqueue(context.Background(), []byte("held"))
	require.NoError(t, err)
	*m, err = q.TryDequeue()
	require.NoError(t, err)
}

// synced waits until the background syncer of SyncInterval has fsynced
// every record appended, or failed to and poisoned the log.
func synced(t *testing.T, q *Queue) {
	t.Helper()
	last, deadline := q.log.LastLSN(), time.Now().Add(hangBound)
	for q.log.DurableLSN() < last && q.log.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the records appended were never fsynced")
		}
		runtime.Gosched()
	}
}

// heldSynced is held with each of its writes fsynced before the next,
// then the log left with nothing to write or fsync, so that act's window
// holds act's operations alone, its write and the fsync of the timer of
// SyncInterval, in every run. Left to itself, the log writes a witness
// of the records fsynced (an idle timer's or a tick's, at a time that
// depends on the clock) and its tick fsyncs it: into act's window, or
// before the consumer sleeps. A Flush writes that witness now, and a
// second one fsyncs it; nothing then needs another.
func heldSynced(t *testing.T, q *Queue, m **Message) {
	_, err := q.Enqueue(context.Background(), []byte("held"))
	require.NoError(t, err)
	synced(t, q)
	*m, err = q.TryDequeue()
	require.NoError(t, err)
	synced(t, q)
	require.NoError(t, q.log.Flush())
	require.NoError(t, q.log.Flush())
}

// waited waits for p, the outcome of an asynchronous call made by act.
func waited(p *Pending, err error) error {
	if err != nil {
		return err
	}
	return p.Wait(context.Background())
}

// A consumer asleep on an empty queue wakes and reports the error that
// poisons the log whatever poisoned it: the write of an enqueue (whose
// message can no longer come), of a settle, an fsync of a Compact. It
// never sleeps on, as if the queue could still deliver.
func TestDequeueWakesOnEveryPoison(t *testing.T) {
	var m *Message
	none := func(*Queue) {}
	cases := []struct {
		name  string
		o     Options
		setup func(*Queue)
		act   func(*Queue) error
	}{
		{"Enqueue", Options{}, none, func(q *Queue) error {
			_, err := q.Enqueue(context.Background(), []byte("m"))
			return err
		}},
		{"EnqueueBatch", Options{}, none, func(q *Queue) error {
			_, err := q.EnqueueBatch(context.Background(), []Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
			return err
		}},
		{"EnqueueAsync", Options{}, none, func(q *Queue) error {
			return waited(q.EnqueueAsync(context.Background(), []byte("m")))
		}},
		{"Ack", Options{}, func(q *Queue) { held(t, q, &m) }, func(*Queue) error { return m.Ack() }},
		{"AckAsync", Options{}, func(q *Queue) { held(t, q, &m) }, func(*Queue) error { return waited(m.AckAsync()) }},
		{"the background fsync of SyncInterval", Options{Sync: SyncInterval, SyncInterval: time.Millisecond},
			func(q *Queue) { heldSynced(t, q, &m) }, func(q *Queue) error {
				if err := m.Ack(); err != nil { // returns once written, before the fsync
					return err
				}
				synced(t, q)
				return nil
			}},
		{"Compact under SyncNever", Options{Sync: SyncNever, manualCompact: true}, func(q *Queue) {
			held(t, q, &m)
			require.NoError(t, m.Ack())
		}, func(q *Queue) error { return q.Compact() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.ManualRequeue = true
			checkWakes(t, dequeueSleeper, c.o, c.setup, c.act)
		})
	}
}

// A Pull asleep wakes and reports the error that poisons the log, be it
// a Publish's write or a batch settle's.
func TestPullWakesOnEveryPoison(t *testing.T) {
	var b *Batch[int64]
	cases := []struct {
		name  string
		setup func(*Queue)
		act   func(*Queue) error
	}{
		{"Publish", func(*Queue) {}, func(q *Queue) error {
			return (&Sorted[int64]{q: q}).Publish(context.Background(), 1, "k", []byte("v"))
		}},
		{"batch Ack", func(q *Queue) {
			s := &Sorted[int64]{q: q}
			require.NoError(t, s.Publish(context.Background(), 1, "held", []byte("v")))
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			b = bs[0]
		}, func(*Queue) error { return b.Ack() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkWakes(t, pullSleeper, Options{ManualRequeue: true}, c.setup, c.act)
		})
	}
}

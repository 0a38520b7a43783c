package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// callFixture is an ack queue holding a leased message ("c", "d" in
// batch, the first also in msg), a dead letter ("b") and one more leased
// message ("a") whose ack was made last (ackErr).
type callFixture struct {
	dir    string
	q      *queue.Queue
	msg    *queue.Message
	batch  queue.Messages
	ackErr error
	before int // operations counted before the ack
}

func newCallFixture(t *testing.T, fs *faultfs.FS) *callFixture {
	t.Helper()
	f, err := buildCallFixture(t, fs)
	require.NoError(t, err)
	return f
}

// buildCallFixture is newCallFixture that returns the error of a call
// before the ack.
func buildCallFixture(t *testing.T, fs *faultfs.FS) (*callFixture, error) {
	return buildCallFixtureArmed(t, fs, func() {})
}

// buildCallFixtureArmed is buildCallFixture that calls arm just before the ack.
func buildCallFixtureArmed(t *testing.T, fs *faultfs.FS, arm func()) (*callFixture, error) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{FS: fs, ManualRequeue: true})
	fail := func(err error) (*callFixture, error) { return nil, errors.Join(err, q.Close()) }
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := q.Enqueue(context.Background(), []byte(id), queue.WithID(id)); err != nil {
			return fail(err)
		}
	}
	a, err := q.TryDequeue()
	if err != nil {
		return fail(err)
	}
	if _, err := q.TryDequeue(); err != nil {
		return fail(err)
	}
	if err := q.DeadLetterID("b", "why"); err != nil {
		return fail(err)
	}
	batch, err := q.DequeueBatch(context.Background(), 2)
	if err != nil {
		return fail(err)
	}
	require.Len(t, batch, 2)
	f := &callFixture{dir: dir, q: q, msg: batch[0], batch: batch, before: len(fs.Ops())}
	arm()
	f.ackErr = a.Ack()
	return f, nil
}

// pendingErr is the outcome of an asynchronous call: its error, or else
// its Pending's.
func pendingErr(p *queue.Pending, err error) error {
	if err != nil || p == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
	defer cancel()
	return p.Wait(ctx)
}

func nth[T any](_ T, err error) error { return err }

// writingCalls are the calls that write the log, each made once on a
// callFixture.
var writingCalls = map[string]func(f *callFixture) error{
	"Enqueue": func(f *callFixture) error { return nth(f.q.Enqueue(context.Background(), []byte("x"))) },
	"Enqueue/held id": func(f *callFixture) error {
		return nth(f.q.Enqueue(context.Background(), []byte("x"), queue.WithID("c")))
	},
	"EnqueueBatch": func(f *callFixture) error {
		return nth(f.q.EnqueueBatch(context.Background(), []queue.Item{{Payload: []byte("x")}}))
	},
	"EnqueueBatch/none": func(f *callFixture) error {
		return nth(f.q.EnqueueBatch(context.Background(), nil))
	},
	"EnqueueAsync": func(f *callFixture) error {
		return pendingErr(f.q.EnqueueAsync(context.Background(), []byte("x")))
	},
	"Typed.Enqueue": func(f *callFixture) error {
		return nth(queue.NewTyped[string](f.q).Enqueue(context.Background(), "x"))
	},
	"Typed.EnqueueAsync": func(f *callFixture) error {
		return pendingErr(queue.NewTyped[string](f.q).EnqueueAsync(context.Background(), "x"))
	},
	"Typed.TryDequeue": func(f *callFixture) error {
		_, _, err := queue.NewTyped[string](f.q).TryDequeue()
		return err
	},
	"Typed.DequeueBatch": func(f *callFixture) error {
		_, _, err := queue.NewTyped[string](f.q).DequeueBatch(context.Background(), 4)
		return err
	},
	"Dequeue": func(f *callFixture) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
		defer cancel()
		return nth(f.q.Dequeue(ctx))
	},
	"TryDequeue":       func(f *callFixture) error { return nth(f.q.TryDequeue()) },
	"DequeueBatch":     func(f *callFixture) error { return nth(f.q.DequeueBatch(context.Background(), 4)) },
	"Ack":              func(f *callFixture) error { return f.q.Ack(f.msg.Receipt) },
	"Nack":             func(f *callFixture) error { return f.q.Nack(f.msg.Receipt, 0) },
	"Extend":           func(f *callFixture) error { return f.q.Extend(f.msg.Receipt, time.Minute) },
	"Extend/zero":      func(f *callFixture) error { return f.q.Extend(f.msg.Receipt, 0) },
	"Extend/negative":  func(f *callFixture) error { return f.q.Extend(f.msg.Receipt, -time.Minute) },
	"DeadLetter":       func(f *callFixture) error { return f.q.DeadLetter(f.msg.Receipt, "why") },
	"AckAsync":         func(f *callFixture) error { return pendingErr(f.q.AckAsync(f.msg.Receipt)) },
	"AckBatch":         func(f *callFixture) error { return f.q.AckBatch(f.batch.Receipts()...) },
	"AckBatch/none":    func(f *callFixture) error { return f.q.AckBatch() },
	"NackBatch":        func(f *callFixture) error { return f.q.NackBatch(0, f.batch.Receipts()...) },
	"NackBatch/none":   func(f *callFixture) error { return f.q.NackBatch(0) },
	"ExtendBatch":      func(f *callFixture) error { return f.q.ExtendBatch(time.Minute, f.batch.Receipts()...) },
	"ExtendBatch/zero": func(f *callFixture) error { return f.q.ExtendBatch(0, f.batch.Receipts()...) },
	"ExtendBatch/none": func(f *callFixture) error { return f.q.ExtendBatch(time.Minute) },
	"Settle": func(f *callFixture) error {
		return f.q.Settle(queue.Settlement{Receipt: f.msg.Receipt, Op: queue.SettleAck})
	},
	"Settle/none": func(f *callFixture) error { return f.q.Settle() },
	"SettleAsync": func(f *callFixture) error {
		return pendingErr(f.q.SettleAsync(queue.Settlement{Receipt: f.msg.Receipt, Op: queue.SettleAck}))
	},
	"SettleAsync/none":    func(f *callFixture) error { return pendingErr(f.q.SettleAsync()) },
	"AckID":               func(f *callFixture) error { return f.q.AckID("c") },
	"AckID/unknown":       func(f *callFixture) error { return f.q.AckID("nope") },
	"NackID":              func(f *callFixture) error { return f.q.NackID("c", 0) },
	"NackID/unknown":      func(f *callFixture) error { return f.q.NackID("nope", 0) },
	"ExtendID":            func(f *callFixture) error { return f.q.ExtendID("c", time.Minute) },
	"ExtendID/zero":       func(f *callFixture) error { return f.q.ExtendID("c", 0) },
	"ExtendID/unknown":    func(f *callFixture) error { return f.q.ExtendID("nope", time.Minute) },
	"DeadLetterID":        func(f *callFixture) error { return f.q.DeadLetterID("c", "why") },
	"DeadLetterID/dead":   func(f *callFixture) error { return f.q.DeadLetterID("b", "why") },
	"Message.Ack":         func(f *callFixture) error { return f.msg.Ack() },
	"Message.Nack":        func(f *callFixture) error { return f.msg.Nack(0) },
	"Message.Extend":      func(f *callFixture) error { return f.msg.Extend(time.Minute) },
	"Message.DeadLetter":  func(f *callFixture) error { return f.msg.DeadLetter("why") },
	"Message.AckAsync":    func(f *callFixture) error { return pendingErr(f.msg.AckAsync()) },
	"Messages.Ack":        func(f *callFixture) error { return f.batch.Ack() },
	"Messages.Nack":       func(f *callFixture) error { return f.batch.Nack(0) },
	"Messages.Extend":     func(f *callFixture) error { return f.batch.Extend(time.Minute) },
	"Messages.AckAsync":   func(f *callFixture) error { return pendingErr(f.batch.AckAsync()) },
	"RequeueDead":         func(f *callFixture) error { return f.q.RequeueDead("b") },
	"RequeueDead/unknown": func(f *callFixture) error { return f.q.RequeueDead("nope") },
	"PurgeDead":           func(f *callFixture) error { return f.q.PurgeDead("b") },
	"RequeueAllDead":      func(f *callFixture) error { return nth(f.q.RequeueAllDead()) },
	"PurgeAllDead":        func(f *callFixture) error { return nth(f.q.PurgeAllDead()) },
	"RequeueExpired":      func(f *callFixture) error { return nth(f.q.RequeueExpired()) },
	"Compact":             func(f *callFixture) error { return f.q.Compact() },
}

// poisonedFixture opens a callFixture whose last ack failed its write,
// which poisoned the log.
func poisonedFixture(t *testing.T) *callFixture {
	t.Helper()
	fs := faultfs.New(0)
	f, err := buildCallFixtureArmed(t, fs, func() { fs.FailNext(wal.StoreWriteBatch) })
	require.NoError(t, err)
	require.ErrorIs(t, f.ackErr, faultfs.ErrInjected)
	return f
}

// Every call that writes the log answers on a poisoned log with the error
// that poisoned it, whatever it is given (receipts or ids that would be
// refused, an invalid duration, nothing at all): never a healthy-looking
// success, refusal or empty result. On a closed queue it answers
// ErrClosed, also when the log was poisoned before Close.
func TestEveryWritingCallPoisonedOrClosed(t *testing.T) {
	requirePoisonedOrClosed(t, writingCalls, func(t *testing.T, poisoned bool) (*callFixture, func() error) {
		if poisoned {
			f := poisonedFixture(t)
			return f, f.q.Close
		}
		f := newCallFixture(t, faultfs.New(0))
		require.NoError(t, f.ackErr)
		return f, f.q.Close
	})
}

// requirePoisonedOrClosed requires of each of calls that it answers the
// error that poisoned the log on a poisoned log, and ErrClosed on a
// closed queue, also when the log was poisoned before Close. open gives a
// fixture, on a poisoned log or a healthy one, and its queue's Close.
func requirePoisonedOrClosed[F any](t *testing.T, calls map[string]func(F) error, open func(t *testing.T, poisoned bool) (F, func() error)) {
	t.Helper()
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Run("poisoned", func(t *testing.T) {
				f, closeQ := open(t, true)
				defer closeQ()
				err := call(f)
				require.ErrorIs(t, err, faultfs.ErrInjected, "%s on a poisoned log answered %v", name, err)
			})
			t.Run("closed", func(t *testing.T) {
				f, closeQ := open(t, false)
				require.NoError(t, closeQ())
				err := call(f)
				require.ErrorIs(t, err, queue.ErrClosed, "%s on a closed queue answered %v", name, err)
			})
			t.Run("closed poisoned", func(t *testing.T) {
				f, closeQ := open(t, true)
				require.ErrorIs(t, closeQ(), faultfs.ErrInjected, "Close returns the poison")
				err := call(f)
				require.ErrorIs(t, err, queue.ErrClosed, "%s on a closed poisoned queue answered %v", name, err)
			})
		})
	}
}

// sortedFixture is a sorted queue holding a pulled batch (held, key "b"),
// a dead value (dead, key "a") and one more pulled batch (key "c") whose
// ack was made last (ackErr).
type sortedFixture struct {
	s      *queue.Sorted[int64]
	held   *queue.Batch[int64]
	dead   queue.DeadValue[int64]
	ackErr error
	before int // operations counted before the ack
}

func newSortedFixture(t *testing.T, fs *faultfs.FS) *sortedFixture {
	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{FS: fs, ManualRequeue: true}})
	require.NoError(t, err)
	for i, key := range []string{"a", "b", "c"} {
		require.NoError(t, s.Publish(context.Background(), int64(i), key, []byte(key)))
	}
	pull := func() *queue.Batch[int64] {
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		return bs[0]
	}
	require.NoError(t, pull().DeadLetter("why"))
	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	f := &sortedFixture{s: s, held: pull(), dead: dead[0]}
	c := pull()
	f.before = len(fs.Ops())
	f.ackErr = c.Ack()
	return f
}

func poisonedSortedFixture(t *testing.T) *sortedFixture {
	t.Helper()
	fs := faultfs.New(0)
	dry := newSortedFixture(t, fs)
	require.NoError(t, dry.ackErr)
	require.NoError(t, dry.s.Close())
	failAt := firstWriteAfter(fs, dry.before)
	require.NotZero(t, failAt, "the ack's write")
	f := newSortedFixture(t, faultfs.New(failAt))
	require.ErrorIs(t, f.ackErr, faultfs.ErrInjected)
	return f
}

// sortedWritingCalls are a sorted queue's calls that write the log.
var sortedWritingCalls = map[string]func(f *sortedFixture) error{
	"Publish": func(f *sortedFixture) error { return f.s.Publish(context.Background(), 9, "d", []byte("d")) },
	"Pull": func(f *sortedFixture) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
		defer cancel()
		return nth(f.s.Pull(ctx, 4))
	},
	"TryPull":                func(f *sortedFixture) error { return nth(f.s.TryPull(4)) },
	"Ack":                    func(f *sortedFixture) error { return f.s.Ack(f.held.Receipt) },
	"Nack":                   func(f *sortedFixture) error { return f.s.Nack(f.held.Receipt, 0) },
	"Extend":                 func(f *sortedFixture) error { return f.s.Extend(f.held.Receipt, time.Minute) },
	"Extend/zero":            func(f *sortedFixture) error { return f.s.Extend(f.held.Receipt, 0) },
	"DeadLetter":             func(f *sortedFixture) error { return f.s.DeadLetter(f.held.Receipt, "why") },
	"Ack/unknown":            func(f *sortedFixture) error { return f.s.Ack(queue.BatchReceipt{}) },
	"Batch.Ack":              func(f *sortedFixture) error { return f.held.Ack() },
	"Batch.Nack":             func(f *sortedFixture) error { return f.held.Nack(0) },
	"Batch.Extend":           func(f *sortedFixture) error { return f.held.Extend(time.Minute) },
	"Batch.DeadLetter":       func(f *sortedFixture) error { return f.held.DeadLetter("why") },
	"RequeueDead":            func(f *sortedFixture) error { return f.s.RequeueDead(f.dead.Seq) },
	"RequeueDead/unknown":    func(f *sortedFixture) error { return f.s.RequeueDead(12345) },
	"PurgeDead":              func(f *sortedFixture) error { return f.s.PurgeDead(f.dead.Seq) },
	"RequeueDeadValue":       func(f *sortedFixture) error { return f.s.RequeueDeadValue(f.dead) },
	"PurgeDeadValue":         func(f *sortedFixture) error { return f.s.PurgeDeadValue(f.dead) },
	"PurgeDeadValue/unknown": func(f *sortedFixture) error { return f.s.PurgeDeadValue(queue.DeadValue[int64]{Seq: 12345}) },
	"RequeueAllDead":         func(f *sortedFixture) error { return nth(f.s.RequeueAllDead()) },
	"PurgeAllDead":           func(f *sortedFixture) error { return nth(f.s.PurgeAllDead()) },
	"RequeueExpired":         func(f *sortedFixture) error { return nth(f.s.RequeueExpired()) },
	"Compact":                func(f *sortedFixture) error { return f.s.Compact() },
}

// A sorted queue's calls that write the log answer as the ack queue's:
// the error that poisoned the log, ErrClosed once closed.
func TestEverySortedWritingCallPoisonedOrClosed(t *testing.T) {
	requirePoisonedOrClosed(t, sortedWritingCalls, func(t *testing.T, poisoned bool) (*sortedFixture, func() error) {
		if poisoned {
			f := poisonedSortedFixture(t)
			return f, f.s.Close
		}
		f := newSortedFixture(t, faultfs.New(0))
		require.NoError(t, f.ackErr)
		return f, f.s.Close
	})
}

// The calls that answer the same in every state: an invalid size, an
// ended context, both checked before anything else.
func TestCallsCheckedBeforeState(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	states := map[string]func(t *testing.T) (*callFixture, *sortedFixture){
		"poisoned": func(t *testing.T) (*callFixture, *sortedFixture) {
			f, s := poisonedFixture(t), poisonedSortedFixture(t)
			t.Cleanup(func() {
				assert.ErrorIs(t, f.q.Close(), faultfs.ErrInjected, "Close returns the poison")
				assert.ErrorIs(t, s.s.Close(), faultfs.ErrInjected, "Close returns the poison")
			})
			return f, s
		},
		"closed": func(t *testing.T) (*callFixture, *sortedFixture) {
			f, s := newCallFixture(t, faultfs.New(0)), newSortedFixture(t, faultfs.New(0))
			require.NoError(t, f.q.Close())
			require.NoError(t, s.s.Close())
			return f, s
		},
	}
	for state, open := range states {
		t.Run(state, func(t *testing.T) {
			f, s := open(t)
			for name, c := range map[string]struct {
				err  error
				want error
			}{
				"DequeueBatch/max0": {nth(f.q.DequeueBatch(context.Background(), 0)), queue.ErrInvalidOptions},
				"Pull/max0":         {nth(s.s.Pull(context.Background(), 0)), queue.ErrInvalidOptions},
				"TryPull/max0":      {nth(s.s.TryPull(0)), queue.ErrInvalidOptions},
				"Dequeue/done":      {nth(f.q.Dequeue(done)), context.Canceled},
				"DequeueBatch/done": {nth(f.q.DequeueBatch(done, 4)), context.Canceled},
				"Pull/done":         {nth(s.s.Pull(done, 4)), context.Canceled},
				"Enqueue/done":      {nth(f.q.Enqueue(done, []byte("x"))), context.Canceled},
				"EnqueueBatch/done": {nth(f.q.EnqueueBatch(done, nil)), context.Canceled},
				"EnqueueAsync/done": {nth(f.q.EnqueueAsync(done, []byte("x"))), context.Canceled},
				"Publish/done":      {s.s.Publish(done, 1, "k", []byte("x")), context.Canceled},
			} {
				require.ErrorIs(t, c.err, c.want, name)
			}
		})
	}
}

// The calls that write nothing, on a poisoned and on a closed queue.
func TestReadingCallsPoisonedOrClosed(t *testing.T) {
	t.Run("poisoned", func(t *testing.T) {
		f, s := poisonedFixture(t), poisonedSortedFixture(t)
		// Under SyncAlways Flush reports the asynchronous calls only, and
		// none was made: a failed synchronous call reported itself.
		require.NoError(t, f.q.Flush(context.Background()))
		require.ErrorIs(t, f.q.Close(), faultfs.ErrInjected, "Close of a poisoned queue")
		require.ErrorIs(t, s.s.Close(), faultfs.ErrInjected, "Close of a poisoned sorted queue")
	})
	t.Run("closed", func(t *testing.T) {
		f, s := newCallFixture(t, faultfs.New(0)), newSortedFixture(t, faultfs.New(0))
		require.NoError(t, f.q.Close())
		require.NoError(t, s.s.Close())
		for name, err := range map[string]error{
			"Close":        f.q.Close(),
			"Sorted.Close": s.s.Close(),
			"Peek":         nth(f.q.Peek(1)),
			"Browse":       nth(f.q.Browse(queue.StateInFlight, 0, 10)),
			"DeadLetters":  nth(f.q.DeadLetters(0, 0)),
			"Keys":         nth(s.s.Keys("", 10)),
			"DeadValues":   nth(s.s.DeadValues(0, 0)),
			"Flush":        f.q.Flush(context.Background()),
		} {
			require.ErrorIs(t, err, queue.ErrClosed, name)
		}
	})
}

// A directory whose last run was poisoned is one a crash left: Verify
// finds no damage (at most a torn tail), Repair has nothing to salvage,
// and the next open replays the log as written: the ack whose write
// failed is not made, and its message is delivered again.
func TestDirectoryAfterPoisonedRun(t *testing.T) {
	f := poisonedFixture(t)
	require.ErrorIs(t, f.q.Close(), faultfs.ErrInjected)
	c, err := queue.Verify(f.dir, nil)
	require.NoError(t, err)
	require.Zero(t, c.Damaged(), "%+v", c)
	require.Empty(t, c.Problems)
	r, err := queue.Repair(f.dir, nil)
	require.NoError(t, err)
	require.False(t, r.Repaired, "%+v", r)
	q := open(t, f.dir, &queue.Options{ManualRequeue: true})
	defer q.Close()
	var got []string
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		got = append(got, m.ID)
	}
	require.ElementsMatch(t, []string{"a", "c", "d"}, got)
	dead, err := q.DeadLetters(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "b", dead[0].ID)
}

// Peek, Browse and Stats show an ack whose write failed as the log has
// it: not made. The message is in flight, as the reopen finds its lease.
func TestViewsOfFailedAck(t *testing.T) {
	f := poisonedFixture(t)
	defer f.q.Close()
	m, err := f.q.Peek(1)
	require.NoError(t, err)
	require.Equal(t, "a", m.ID)
	require.Equal(t, queue.StateInFlight, m.State)
	ms, err := f.q.Browse(queue.StateInFlight, 0, 10)
	require.NoError(t, err)
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"a", "c", "d"}, ids)
	st := f.q.Stats()
	require.NoError(t, st.CountsErr)
	require.EqualValues(t, 3, st.InFlight)
	require.Zero(t, st.Acked)
}

// A windowed queue's Publish answers as the sorted queue's: the error
// that poisoned the log (here a publish whose write failed), ErrClosed
// once closed.
func TestWindowedPublishPoisonedOrClosed(t *testing.T) {
	run := func(fs *faultfs.FS) (*queue.Windowed, error, int) {
		w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{Window: time.Minute,
			SortedOptions: queue.SortedOptions{Options: queue.Options{FS: fs, ManualRequeue: true}}})
		require.NoError(t, err)
		require.NoError(t, w.Publish(context.Background(), "k", []byte("v")))
		before := len(fs.Ops())
		return w, w.Publish(context.Background(), "k", []byte("v")), before
	}
	fs := faultfs.New(0)
	w, err, before := run(fs)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.ErrorIs(t, w.Publish(context.Background(), "k", nil), queue.ErrClosed, "closed")
	failAt := firstWriteAfter(fs, before)
	require.NotZero(t, failAt, "the publish's write")
	w, err, _ = run(faultfs.New(failAt))
	require.ErrorIs(t, err, faultfs.ErrInjected)
	require.ErrorIs(t, w.Publish(context.Background(), "k", nil), faultfs.ErrInjected, "poisoned")
	require.ErrorIs(t, w.Close(), faultfs.ErrInjected)
	require.ErrorIs(t, w.Publish(context.Background(), "k", nil), queue.ErrClosed, "closed poisoned")
}

package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

var modeName = map[queue.SyncMode]string{queue.SyncAlways: "always", queue.SyncInterval: "interval", queue.SyncNever: "never"}

// Under every sync mode, a completed EnqueueAsync is in the queue as a
// returned Enqueue would be: here, in a crash image taken after it (what
// a kill -9 leaves), and, under SyncAlways, below DurableLSN.
func TestEnqueueAsyncCompletes(t *testing.T) {
	for _, mode := range []queue.SyncMode{queue.SyncAlways, queue.SyncInterval, queue.SyncNever} {
		t.Run(modeName[mode], func(t *testing.T) {
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{Sync: mode, MaxPending: 16})
			defer q.Close()
			ctx := context.Background()
			var ps []*queue.Pending
			for i := range 200 {
				p, err := q.EnqueueAsync(ctx, []byte(fmt.Sprint(i)))
				require.NoError(t, err)
				require.NotEmpty(t, p.ID())
				ps = append(ps, p)
			}
			p, err := q.EnqueueAsync(ctx, []byte("given"), queue.WithID("given"))
			require.NoError(t, err)
			require.Equal(t, "given", p.ID())
			ps = append(ps, p)
			for _, p := range ps {
				require.NoError(t, p.Wait(ctx))
				require.NoError(t, p.Err())
			}
			if mode == queue.SyncAlways {
				st := q.Stats()
				require.Equal(t, st.LastLSN, st.DurableLSN)
			}
			_, err = q.EnqueueAsync(ctx, []byte("again"), queue.WithID("given"))
			require.ErrorIs(t, err, queue.ErrDuplicate)

			q2 := open(t, crashImage(t, dir), nil)
			defer q2.Close()
			for i := range 200 {
				m := tryDequeue(t, q2)
				require.Equal(t, fmt.Sprint(i), string(m.Payload))
				require.Equal(t, ps[i].ID(), m.ID)
			}
			require.Equal(t, "given", tryDequeue(t, q2).ID)
			requireEmpty(t, q2)
		})
	}
}

// A consumer blocked in Dequeue gets a message enqueued asynchronously
// once it is written, without any other call waking it.
func TestEnqueueAsyncWakesConsumer(t *testing.T) {
	for _, mode := range []queue.SyncMode{queue.SyncAlways, queue.SyncNever} {
		t.Run(modeName[mode], func(t *testing.T) {
			q := open(t, t.TempDir(), &queue.Options{Sync: mode})
			defer q.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const n = 500
			got := make(chan string, n)
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						m, err := q.Dequeue(ctx)
						if err != nil {
							return
						}
						got <- string(m.Payload)
						if _, err := m.AckAsync(); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			time.Sleep(10 * time.Millisecond) // let both consumers block
			for i := range n {
				_, err := q.EnqueueAsync(ctx, []byte(fmt.Sprint(i)))
				require.NoError(t, err)
				if i%100 == 0 {
					time.Sleep(time.Millisecond) // consumers catch up and block again
				}
			}
			seen := map[string]bool{}
			for len(seen) < n {
				select {
				case p := <-got:
					seen[p] = true
				case <-ctx.Done():
					t.Fatalf("%d of %d delivered", len(seen), n)
				}
			}
			require.NoError(t, q.Flush(ctx))
			cancel()
			wg.Wait()
			require.EqualValues(t, n, q.Stats().Acked)
		})
	}
}

// Asynchronous acks take the message out at once; once their Pending
// completed, a crash image (kill -9) never delivers them again.
func TestAckAsyncDurable(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{MaxPending: 3})
	defer q.Close()
	for i := range 20 {
		enqueue(t, q, fmt.Sprint(i))
	}
	var ps []*queue.Pending
	for range 10 {
		m := tryDequeue(t, q)
		p, err := m.AckAsync()
		require.NoError(t, err)
		require.Empty(t, p.ID())
		ps = append(ps, p)
		_, err = m.AckAsync()
		require.ErrorIs(t, err, queue.ErrLeaseLost)
	}
	ms := dequeueN(t, q, 10)
	p, err := ms.AckAsync() // larger than the window: waits for it to empty
	require.NoError(t, err)
	ps = append(ps, p)
	requireEmpty(t, q)
	require.NoError(t, q.Flush(context.Background()))
	for _, p := range ps {
		select {
		case <-p.Done():
		default:
			t.Fatal("Flush returned before a Pending completed")
		}
		require.NoError(t, p.Err())
	}
	q2 := open(t, crashImage(t, dir), nil)
	defer q2.Close()
	requireEmpty(t, q2)
	require.EqualValues(t, 20, q2.Stats().Acked)
}

// SettleAsync refuses what it must at once and applies the rest.
func TestSettleAsyncRefusals(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	enqueue(t, q, "a")
	m := tryDequeue(t, q)
	p, err := q.SettleAsync(
		queue.Settlement{Receipt: queue.Receipt{Seq: 77, Lease: 78}, Op: queue.SettleAck},
		queue.Settlement{Receipt: m.Receipt, Op: queue.SettleNack, Delay: -time.Second},
		queue.Settlement{Receipt: m.Receipt, Op: queue.SettleNack},
	)
	var be *queue.BatchError
	require.ErrorAs(t, err, &be)
	require.ErrorIs(t, be.Errs[0], queue.ErrLeaseLost)
	require.ErrorIs(t, be.Errs[1], queue.ErrInvalidOptions)
	require.NoError(t, be.Errs[2])
	require.NotNil(t, p)
	require.NoError(t, p.Wait(context.Background()))
	m = tryDequeue(t, q)
	require.Equal(t, 2, m.Deliveries)

	p, err = q.SettleAsync(queue.Settlement{Receipt: queue.Receipt{Seq: 77, Lease: 78}, Op: queue.SettleAck})
	require.Nil(t, p)
	require.ErrorIs(t, err, queue.ErrLeaseLost)
}

// EnqueueAsync blocks while the window is full, until ctx ends.
func TestEnqueueAsyncWindowContext(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{MaxPending: 1})
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := q.EnqueueAsync(ctx, []byte("x"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = queue.Open(t.TempDir(), &queue.Options{MaxPending: -1})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.NoError(t, q.Close())
	_, err = q.EnqueueAsync(context.Background(), []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)
	require.ErrorIs(t, q.Flush(context.Background()), queue.ErrClosed)
}

// One message at a time, each enqueued asynchronously while the consumer
// is blocked: the consumer wakes when it is written, not at some later
// call.
func TestEnqueueAsyncWakesBlockedConsumer(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	ctx := context.Background()
	for i := range 50 {
		got := make(chan *queue.Message, 1)
		go func() {
			m, err := q.Dequeue(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		time.Sleep(2 * time.Millisecond) // the consumer blocks
		p, err := q.EnqueueAsync(ctx, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		select {
		case m := <-got:
			require.Equal(t, p.ID(), m.ID)
			require.NoError(t, m.Ack())
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the blocked consumer was not woken", i)
		}
	}
}

// Flush reports the outcome of the asynchronous calls, not of the queue:
// calls that all completed without error make it return nil even after a
// later synchronous call's fsync failed and poisoned the log, and a call
// whose commit failed makes it return that error even once it was
// forgotten as done. (A producer told that durable messages failed would
// enqueue them again.)
func TestFlushReportsTheAsyncCalls(t *testing.T) {
	// run opens a queue on a file system that fails its failAt-th
	// operation, completes one EnqueueAsync, then makes a sync Enqueue
	// (its error is returned), and returns the queue and the operations
	// counted before the Enqueue.
	run := func(t *testing.T, failAt int) (*queue.Queue, int, error) {
		fs := faultfs.New(failAt)
		q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
		p, err := q.EnqueueAsync(context.Background(), []byte("async"))
		require.NoError(t, err)
		require.NoError(t, p.Wait(context.Background()))
		before := len(fs.Ops())
		_, err = q.Enqueue(context.Background(), []byte("sync"))
		return q, before, err
	}
	dry, before, err := run(t, 0)
	require.NoError(t, err)
	require.NoError(t, dry.Close())
	q, _, err := run(t, before+1) // the sync Enqueue's first operation fails
	require.ErrorIs(t, err, faultfs.ErrInjected)
	defer q.Close()
	require.NoError(t, q.Flush(context.Background()), "the one asynchronous call succeeded")

	p, err := q.EnqueueAsync(context.Background(), []byte("refused"))
	require.Error(t, err, "the log is poisoned")
	require.Nil(t, p)
}

// Flush fails with the error of an asynchronous call whose commit failed,
// also after a later call found that call done and forgot it.
func TestFlushReportsAFailedAsyncCall(t *testing.T) {
	// run opens a queue on a file system that fails its failAt-th
	// operation and makes one EnqueueAsync; it returns the queue, the
	// Pending and the operations counted before the call.
	run := func(t *testing.T, failAt int) (*queue.Queue, *queue.Pending, int) {
		fs := faultfs.New(failAt)
		q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
		before := len(fs.Ops())
		p, err := q.EnqueueAsync(context.Background(), []byte("async"))
		require.NoError(t, err)
		return q, p, before
	}
	dry, p, before := run(t, 0)
	require.NoError(t, p.Wait(context.Background()))
	require.NoError(t, dry.Close())
	q, p, _ := run(t, before+1) // the commit's first operation fails
	defer q.Close()
	require.ErrorIs(t, p.Wait(context.Background()), faultfs.ErrInjected)
	_, err := q.EnqueueAsync(context.Background(), []byte("refused")) // finds the first done
	require.Error(t, err)
	require.ErrorIs(t, q.Flush(context.Background()), faultfs.ErrInjected)
}

// Under SyncInterval and SyncNever an asynchronous call completes once
// its records are written; when the fsync that would cover them then
// fails (here the one a compaction makes), Flush reports that error: the
// calls it waited for are not durable, and after a failed fsync their
// written pages may be gone too.
func TestFlushReportsAFailedSyncAfterWrite(t *testing.T) {
	for _, mode := range []queue.SyncMode{queue.SyncInterval, queue.SyncNever} {
		t.Run(modeName[mode], func(t *testing.T) {
			// run opens a queue on a file system that fails its failAt-th
			// operation, completes one EnqueueAsync and compacts; it
			// returns the queue, the operations counted before the
			// compaction and the compaction's error.
			run := func(fs *faultfs.FS) (*queue.Queue, int, error) {
				q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true, Sync: mode, SyncInterval: time.Hour})
				p, err := q.EnqueueAsync(context.Background(), []byte("async"))
				require.NoError(t, err)
				require.NoError(t, p.Wait(context.Background()))
				before := len(fs.Ops())
				return q, before, q.Compact()
			}
			dry := faultfs.New(0)
			q, before, err := run(dry)
			require.NoError(t, err)
			require.NoError(t, q.Close())
			at := 0
			for i, op := range dry.Ops()[before:] {
				if op.Kind == "fsync" {
					at = before + i + 1
					break
				}
			}
			require.NotZero(t, at, "the compaction fsyncs")
			q, _, err = run(faultfs.New(at))
			defer q.Close()
			require.ErrorIs(t, err, faultfs.ErrInjected)
			require.ErrorIs(t, q.Flush(context.Background()), faultfs.ErrInjected,
				"the fsync that would have covered the asynchronous call failed")
		})
	}
}

// A Pending whose outcome is known reports it from Wait, whatever the
// context: a context that ended does not hide a success (a producer
// told the context's error would enqueue again) nor a failure.
func TestPendingWaitOutcomeBeforeContext(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	p, err := q.EnqueueAsync(context.Background(), []byte("x"))
	require.NoError(t, err)
	<-p.Done()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		require.NoError(t, p.Wait(ctx), "wait %d", i)
	}
}

package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// TestReadersBesideCompaction: the views that read payloads from the log
// lazily (Peek, DeadLetters, DeadValues, and Browse, which reads the
// never-delivered messages from the log) run in a loop while producers,
// consumers, requeues and purges of dead letters and compactions
// (4 KiB segments, a snapshot every 8 KiB) copy records forward and cut
// the log behind them. A view must never fail, and never return a payload
// that is not its message's own; Peek may say ErrNotFound only of a
// message that is gone (acked or purged: its id is not live, as the
// producers' and consumers' own record of ids in flight says).
//
// Short run: 1.5 s, longer (30 s more at most) until a compaction has
// copied a message forward and a view has peeked. Long run:
//
//	WALQ_READERS_MS=60000 go test ./fuzz -run '^TestReadersBesideCompaction$' -v
func TestReadersBesideCompaction(t *testing.T) {
	run := time.Duration(envInt(t, "WALQ_READERS_MS", 1500)) * time.Millisecond
	rng, seed := testRand(t)
	o := queue.Options{Sync: queue.SyncNever, SegmentSize: 4 << 10, SnapshotBytes: 8 << 10,
		AckTimeout: time.Minute, MaxDeliveries: 2}
	q := mustOpen(t, t.TempDir(), &o)
	defer q.Close()
	so := queue.SortedOptions{Options: o, CacheBytes: -1}
	s, err := queue.OpenSorted[int64](t.TempDir(), &so)
	must(t, err)
	defer s.Close()

	r := &readersRun{q: q, s: s, stop: make(chan struct{})}
	workers := []func(*rand.Rand){r.produce, r.consume, r.publish, r.pull, r.housekeep,
		r.readDead, r.readPeek, r.readDeadValues}
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			w(rng)
		}(rand.New(rand.NewPCG(seed, uint64(i))))
	}
	time.Sleep(run + time.Duration(rng.IntN(10))*time.Millisecond)
	r.untilProven(readersGrace)
	close(r.stop)
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fails) > 0 {
		t.Fatalf("%d violations, first: %v", len(r.fails), r.fails[:min(5, len(r.fails))])
	}
	st, sst := q.Stats(), s.Stats()
	t.Logf("SUMMARY readers: %v; reads=%d peeks=%d not-found=%d; enqueued=%d moved=%d dead-lettered=%d; published=%d sorted moved=%d",
		run, r.reads.Load(), r.peeks.Load(), r.notFound.Load(), st.Enqueued, st.Moved, st.DeadLettered, sst.Published, sst.Moved)
	if st.Moved+sst.Moved == 0 || r.peeks.Load() == 0 {
		t.Fatalf("no copy forward (%d, %d) or no peek (%d): the run proved nothing", st.Moved, sst.Moved, r.peeks.Load())
	}
}

// readersGrace is how much longer than WALQ_READERS_MS the run goes on,
// at most, until it has copied something forward and peeked: a machine
// under load may need more than the run's time for a compaction to move
// a message.
const readersGrace = 30 * time.Second

// untilProven lets the workers run on, grace at most, until a compaction
// has copied a message forward (in either queue) and a reader has peeked.
func (r *readersRun) untilProven(grace time.Duration) {
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if r.q.Stats().Moved+r.s.Stats().Moved > 0 && r.peeks.Load() > 0 {
			return
		}
	}
}

// readersRun is the shared state of TestReadersBesideCompaction.
type readersRun struct {
	q    *queue.Queue
	s    *queue.Sorted[int64]
	stop chan struct{}
	// gone holds the ids acked or purged (a Peek may not find them);
	// they are added before the call, as its outcome is then open.
	gone                   sync.Map
	reads, peeks, notFound atomic.Int64
	mu                     sync.Mutex
	fails                  []string
}

func (r *readersRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *readersRun) failf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, fmt.Sprintf(format, args...))
}

func (r *readersRun) produce(rng *rand.Rand) {
	for n := 0; !r.stopped(); n++ {
		if st := r.q.Stats(); st.Ready+st.Dead > 300 {
			time.Sleep(time.Millisecond)
			continue
		}
		tok := fmt.Sprintf("A%d-%d", n, rng.IntN(600))
		if _, err := r.q.Enqueue(context.Background(), deadPayload(tok), queue.WithID(tok)); err != nil {
			r.failf("enqueue: %v", err)
		}
	}
}

func (r *readersRun) consume(rng *rand.Rand) {
	for !r.stopped() {
		m, err := r.q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			r.failf("dequeue: %v", err)
			continue
		}
		r.check("delivered", m.ID, m.Payload)
		switch rng.IntN(3) {
		case 0:
			r.gone.Store(m.ID, true)
			err = m.Ack()
		case 1:
			err = m.Nack(0)
		default:
			err = m.DeadLetter("readers")
		}
		if err != nil {
			r.failf("settle %s: %v", m.ID, err)
		}
	}
}

func (r *readersRun) housekeep(rng *rand.Rand) {
	for !r.stopped() {
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		dls, err := r.q.DeadLetters(0, 20)
		if err != nil {
			r.failf("dead letters (housekeeper): %v", err)
			continue
		}
		for _, dl := range dls {
			switch rng.IntN(3) {
			case 0:
				r.gone.Store(dl.ID, true)
				err = r.q.PurgeDead(dl.ID)
			case 1:
				err = r.q.RequeueDead(dl.ID)
			}
			if err != nil {
				r.failf("requeue or purge %s: %v", dl.ID, err)
			}
		}
		if rng.IntN(4) == 0 {
			if err := r.q.Compact(); err != nil {
				r.failf("compact: %v", err)
			}
			if err := r.s.Compact(); err != nil {
				r.failf("compact sorted: %v", err)
			}
		}
	}
}

func (r *readersRun) check(what, id string, p []byte) {
	if tokenOf(p) != id {
		r.failf("%s %s: payload of %s", what, id, tokenOf(p))
		return
	}
	if err := deadPayloadErr(id, p); err != nil {
		r.failf("%s: %v", what, err)
	}
}

func (r *readersRun) readDead(rng *rand.Rand) {
	for !r.stopped() {
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		dls, err := r.q.DeadLetters(0, 0)
		if err != nil {
			r.failf("dead letters: %v", err)
			continue
		}
		r.reads.Add(1)
		for _, dl := range dls {
			r.check("dead letter", dl.ID, dl.Payload)
		}
	}
}

// readPeek browses ready and dead messages and peeks at each.
func (r *readersRun) readPeek(rng *rand.Rand) {
	states := []queue.MessageState{queue.StateReady, queue.StateDead}
	for !r.stopped() {
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		infos, err := r.q.Browse(states[rng.IntN(2)], 0, 50)
		if err != nil {
			r.failf("browse: %v", err)
			continue
		}
		for _, info := range infos {
			got, err := r.q.Peek(info.Seq)
			r.peeks.Add(1)
			switch _, gone := r.gone.Load(info.ID); {
			case errors.Is(err, queue.ErrNotFound) && gone:
				r.notFound.Add(1)
			case err != nil:
				r.failf("peek %d (%s, gone %v): %v", info.Seq, info.ID, gone, err)
			default:
				r.check("peeked", info.ID, got.Payload)
			}
		}
	}
}

func (r *readersRun) publish(rng *rand.Rand) {
	for n := 0; !r.stopped(); n++ {
		if st := r.s.Stats(); st.SortedPending+st.SortedDead > 300 {
			time.Sleep(time.Millisecond)
			continue
		}
		tok := fmt.Sprintf("S%d-%d", n, rng.IntN(600))
		if err := r.s.Publish(context.Background(), rng.Int64N(100), fmt.Sprint("k", rng.IntN(8)), deadPayload(tok)); err != nil {
			r.failf("publish: %v", err)
		}
	}
}

func (r *readersRun) pull(rng *rand.Rand) {
	for !r.stopped() {
		bs, err := r.s.TryPull(1 + rng.IntN(10))
		if errors.Is(err, queue.ErrEmpty) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			r.failf("pull: %v", err)
			continue
		}
		for _, b := range bs {
			for _, v := range b.Values {
				r.check("pulled", tokenOf(v.Payload), v.Payload)
			}
			switch rng.IntN(3) {
			case 0:
				err = b.Ack()
			case 1:
				err = b.Nack(0)
			default:
				err = b.DeadLetter("readers")
			}
			if err != nil {
				r.failf("settle batch: %v", err)
			}
		}
	}
}

// readDeadValues lists the sorted queue's dead values and requeues or
// purges some.
func (r *readersRun) readDeadValues(rng *rand.Rand) {
	for !r.stopped() {
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		dvs, err := r.s.DeadValues(0, 0)
		if err != nil {
			r.failf("dead values: %v", err)
			continue
		}
		r.reads.Add(1)
		for _, dv := range dvs {
			r.check("dead value", tokenOf(dv.Payload), dv.Payload)
			switch rng.IntN(8) {
			case 0:
				err = r.s.PurgeDeadValue(dv)
			case 1:
				err = r.s.RequeueDeadValue(dv)
			}
			if err != nil {
				r.failf("requeue or purge dead value %d: %v", dv.Seq, err)
			}
		}
	}
}

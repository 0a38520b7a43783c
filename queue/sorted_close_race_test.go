package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/internal/seed"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// sortedLedger is what the goroutines of a sorted close race were told, by
// token (a value's sort key in the sorted queue, and in its payload).
type sortedLedger struct {
	mu       sync.Mutex
	durable  map[int]bool // publish returned nil
	gone     map[int]bool // batch ack or purge reported durable
	goneTry  map[int]bool // ack or purge made, outcome unknown
	bad      []string
	pulled   int
	deadSeen int

	allowed  []error     // besides ErrClosed, what a call may answer (the injected failure)
	poisoned atomic.Bool // a write of the log answered the injected failure
}

func (l *sortedLedger) note(f func()) { l.mu.Lock(); defer l.mu.Unlock(); f() }

func (l *sortedLedger) wrong(format string, args ...any) {
	l.note(func() { l.bad = append(l.bad, fmt.Sprintf(format, args...)) })
}

func (l *sortedLedger) expect(call string, err error, ok ...error) {
	if err == nil {
		return
	}
	for _, o := range append(ok, l.allowed...) {
		if errors.Is(err, o) {
			return
		}
	}
	l.wrong("%s: %v", call, err)
}

// write runs a call that writes the log: one that begins once a write met
// the injected failure must fail too (the log is poisoned), a TryPull
// included, which must not answer ErrEmpty then.
func (l *sortedLedger) write(call string, f func() error) error {
	after := l.poisoned.Load()
	err := f()
	switch {
	case after && (err == nil || errors.Is(err, queue.ErrEmpty)):
		l.wrong("%s began after the log was poisoned and answered %v", call, err)
	case len(l.allowed) > 0 && errors.Is(err, l.allowed[0]):
		l.poisoned.Store(true)
	}
	return err
}

func raceKey(tok int) string { return fmt.Sprintf("k%d", tok%7) }

// raceSortedOptions are the options of the sorted queues the races run:
// small segments, snapshots and payload cache, so that rolls, compactions
// and reads from disk happen under the racing calls; fsys is nil or the
// file system whose failures a race injects.
func raceSortedOptions(mode queue.SyncMode, clk queue.Clock, fsys *faultfs.FS) queue.SortedOptions {
	o := queue.SortedOptions{Options: queue.Options{Sync: mode, SegmentSize: 4096, SnapshotBytes: 16 << 10,
		AckTimeout: time.Hour, Clock: clk, MaxDeliveries: 3}, CacheBytes: 2048}
	if fsys != nil {
		o.FS = fsys
	}
	return o
}

// sortedRaceByToken runs sortedRace on a sorted queue whose values are
// sorted by their token and keyed by raceKey.
func sortedRaceByToken(t *testing.T, rng *rand.Rand, s *queue.Sorted[int64], fail *faultfs.FS) *sortedLedger {
	pub := func(ctx context.Context, tok int, p []byte) error {
		return s.Publish(ctx, int64(tok), raceKey(tok), p)
	}
	return sortedRace(t, rng, s, pub, func(v queue.Value[int64], tok int) bool { return v.Sort == int64(tok) }, nil, fail)
}

// value checks one value of a batch of key and returns its token.
func (l *sortedLedger) value(key string, payload []byte, where string) (int, bool) {
	tok, err := unstamp(payload)
	if err != nil {
		l.wrong("%s of key %s with a wrong payload: %v", where, key, err)
		return 0, false
	}
	if raceKey(tok) != key {
		l.wrong("%s of key %s holds token %d, published under %s", where, key, tok, raceKey(tok))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone[tok] {
		l.bad = append(l.bad, fmt.Sprintf("%s: token %d after its ack or purge was reported durable", where, tok))
	}
	return tok, true
}

// TestSortedCloseRaces does for sorted and windowed queues what
// TestCloseRacesEveryCall does for the ack queue: publishers, pullers
// (Pull blocked and not, every batch settle), a housekeeper (Compact,
// Stats, Keys, DeadValues, RequeueDeadValue, PurgeDeadValue) run on 4 KiB
// segments with a payload cache of 2 KiB, so that most payloads are read
// back from a log that compactions cut and copy forward, until a Close.
// Every payload pulled or listed is the one published under its key; each
// call returns nil or ErrClosed; after a reopen every value published and
// never acked or purged is there, and none acked or purged is.
func TestSortedCloseRaces(t *testing.T) {
	sd := seed.Take(t, "./queue")
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for i := range rounds {
		for _, mode := range []queue.SyncMode{queue.SyncAlways, queue.SyncNever} {
			rng := rand.New(rand.NewPCG(sd, uint64(i*2+int(mode))))
			clk := fakeclock.New()
			so := raceSortedOptions(mode, clk, nil)
			dir := t.TempDir()
			s, err := queue.OpenSorted[int64](dir, &so)
			if err != nil {
				t.Fatal(err)
			}
			l := sortedRaceByToken(t, rng, s, nil)
			if s, err = queue.OpenSorted[int64](dir, &so); err != nil {
				t.Fatal(err)
			}
			clk.Advance(2 * time.Hour)
			checkSortedAfterRace(t, s, l)

			wo := queue.WindowOptions{SortedOptions: so, Window: 5 * time.Millisecond}
			dir = t.TempDir()
			w, err := queue.OpenWindowed(dir, &wo)
			if err != nil {
				t.Fatal(err)
			}
			wpub := func(ctx context.Context, tok int, p []byte) error { return w.Publish(ctx, raceKey(tok), p) }
			tick := func() { clk.Advance(time.Millisecond) }
			l = sortedRace(t, rng, w.Sorted, wpub, func(v queue.Value[time.Time], _ int) bool { return v.Sort.Equal(v.PublishedAt) }, tick, nil)
			if w, err = queue.OpenWindowed(dir, &wo); err != nil {
				t.Fatal(err)
			}
			clk.Advance(2 * time.Hour)
			checkSortedAfterRace(t, w.Sorted, l)
		}
	}
}

// sortedRace runs the race on s and closes it; tick, when set, moves the
// clock while it runs; fail, when set, is s's file system, which fails
// one operation at a random moment of the race.
func sortedRace[K queue.SortKey](t *testing.T, rng *rand.Rand, s *queue.Sorted[K],
	pub func(context.Context, int, []byte) error, sortOK func(queue.Value[K], int) bool, tick func(), fail *faultfs.FS) *sortedLedger {
	t.Helper()
	r := &sortedRacer[K]{s: s, pub: pub, sortOK: sortOK, tick: tick,
		l: &sortedLedger{durable: map[int]bool{}, gone: map[int]bool{}, goneTry: map[int]bool{}}}
	if fail != nil {
		r.l.allowed = []error{faultfs.ErrInjected}
	}
	for i := range 2 {
		r.wg.Add(2)
		go r.publish(rng.Uint64() + uint64(i))
		go r.pull(rng.Uint64() + uint64(i))
	}
	r.wg.Add(1)
	go r.keep(rng.Uint64())
	time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
	if fail != nil {
		kinds := []string{"write", "fsync", "open", "remove", "rename", "dirsync", wal.StoreWriteBatch, wal.StoreTruncateFront}
		fail.FailNext(kinds[rng.IntN(len(kinds))])
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	}
	r.l.expect("Close", s.Close(), errors.New("none"))
	waitGroupWithin(t, &r.wg, 20*time.Second)
	if len(r.l.bad) > 0 {
		t.Fatalf("%d wrong answers, the first ones: %q", len(r.l.bad), r.l.bad[:min(len(r.l.bad), 5)])
	}
	return r.l
}

// sortedRacer is one race of sortedRace: the queue its goroutines
// (publish, pull, keep) call until Close, and what the calls were told.
type sortedRacer[K queue.SortKey] struct {
	s      *queue.Sorted[K]
	pub    func(context.Context, int, []byte) error // publishes a token's payload
	sortOK func(queue.Value[K], int) bool           // whether a value pulled has its token's sort key
	tick   func()                                   // moves the clock; nil: it stands still
	l      *sortedLedger
	next   sync2Counter   // tokens
	wg     sync.WaitGroup // the goroutines
}

// publish publishes fresh tokens until a call fails.
func (r *sortedRacer[K]) publish(seed uint64) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 3))
	l := r.l
	for {
		tok := r.next.add()
		p := stamped(tok, rng)
		if err := l.write("Publish", func() error { return r.pub(context.Background(), tok, p) }); err != nil {
			l.expect("Publish", err, queue.ErrClosed)
			return
		}
		l.note(func() { l.durable[tok] = true })
	}
}

// pull takes batches, checks their values and settles each until a call
// fails.
func (r *sortedRacer[K]) pull(seed uint64) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 4))
	for {
		bs, err := r.take(rng)
		for _, b := range bs {
			if serr := r.settle(rng, b, r.check(b)); serr != nil {
				r.l.expect("batch settle", serr, queue.ErrClosed)
				return
			}
		}
		if err != nil {
			r.l.expect("Pull", err, queue.ErrClosed)
			return
		}
	}
}

// take makes one Pull or TryPull call; an empty queue is no error, and
// moves the clock.
func (r *sortedRacer[K]) take(rng *rand.Rand) ([]*queue.Batch[K], error) {
	if rng.IntN(2) == 0 {
		return r.s.Pull(context.Background(), 1+rng.IntN(3))
	}
	var bs []*queue.Batch[K]
	err := r.l.write("TryPull", func() (err error) { bs, err = r.s.TryPull(1 + rng.IntN(3)); return err })
	if errors.Is(err, queue.ErrEmpty) {
		err = nil
		if r.tick != nil {
			r.tick()
		}
	}
	return bs, err
}

// check holds b's values to the ledger and returns their tokens.
func (r *sortedRacer[K]) check(b *queue.Batch[K]) []int {
	l := r.l
	toks := make([]int, 0, len(b.Values))
	for _, v := range b.Values {
		if tok, ok := l.value(b.Key, v.Payload, "pull"); ok {
			toks = append(toks, tok)
			if !r.sortOK(v, tok) {
				l.wrong("token %d pulled with sort key %v", tok, v.Sort)
			}
		}
	}
	l.note(func() { l.pulled += len(toks) })
	return toks
}

// settle acks (by the batch or by its receipt after an Extend), nacks or
// dead-letters b, whose values' tokens are toks, or leaves it leased, and
// notes what it was told.
func (r *sortedRacer[K]) settle(rng *rand.Rand, b *queue.Batch[K], toks []int) error {
	switch rng.IntN(6) {
	case 0, 1:
		return r.ack(toks, "Ack", b.Ack)
	case 2:
		return r.l.write("Nack", func() error { return b.Nack(0) })
	case 3:
		if err := r.l.write("Extend", func() error { return b.Extend(time.Hour) }); err != nil {
			return err
		}
		return r.ack(toks, "Ack by receipt", func() error { return r.s.Ack(b.Receipt) })
	case 4:
		return r.l.write("DeadLetter", func() error { return b.DeadLetter("race") })
	}
	return nil // left leased
}

// ack makes an ack of toks by call, named name, and notes it tried, and,
// when the call returned nil, that the ack is durable.
func (r *sortedRacer[K]) ack(toks []int, name string, call func() error) error {
	l := r.l
	mark := func(m map[int]bool) {
		l.note(func() {
			for _, tok := range toks {
				m[tok] = true
			}
		})
	}
	mark(l.goneTry)
	err := l.write(name, call)
	if err == nil {
		mark(l.gone)
	}
	return err
}

// keep makes the housekeeping calls in turn (Compact, Stats, Keys,
// DeadValues with requeues and purges) until one fails.
func (r *sortedRacer[K]) keep(seed uint64) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := 0; ; i++ {
		var err error
		switch i % 4 {
		case 0:
			err = r.s.Compact()
			if r.tick != nil {
				r.tick()
			}
		case 1:
			st := r.s.Stats()
			err = st.CountsErr
			r.l.expect("Stats.OldestErr", st.OldestErr) // a sorted queue's oldest value is in memory
		case 2:
			_, err = r.s.Keys("", 100)
		case 3:
			err = r.dead(rng)
		}
		if err != nil {
			r.l.expect(fmt.Sprint("housekeeping call ", i%4), err, queue.ErrClosed)
			return
		}
	}
}

// dead lists the dead values and requeues, purges or leaves each.
func (r *sortedRacer[K]) dead(rng *rand.Rand) error {
	l := r.l
	ds, err := r.s.DeadValues(0, 0)
	for _, d := range ds {
		tok, ok := l.value(d.Key, d.Payload, "dead value")
		if !ok || err != nil {
			continue
		}
		l.note(func() { l.deadSeen++ })
		switch rng.IntN(3) {
		case 0:
			err = l.write("RequeueDeadValue", func() error { return r.s.RequeueDeadValue(d) })
		case 1:
			err = r.ack([]int{tok}, "PurgeDeadValue", func() error { return r.s.PurgeDeadValue(d) })
		}
	}
	return err
}

// checkSortedAfterRace drains a reopened sorted queue whose leases ran out
// and holds what it finds to the ledger.
func checkSortedAfterRace[K queue.SortKey](t *testing.T, s *queue.Sorted[K], l *sortedLedger) {
	t.Helper()
	defer s.Close()
	if _, err := s.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	found := map[int]int{}
	for {
		bs, err := s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		for _, b := range bs {
			for _, v := range b.Values {
				if tok, ok := l.value(b.Key, v.Payload, "drain"); ok {
					found[tok]++
				}
			}
			if err := b.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ds, err := s.DeadValues(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if tok, ok := l.value(d.Key, d.Payload, "dead value after reopen"); ok {
			found[tok]++
		}
	}
	for tok := range l.durable {
		if !l.goneTry[tok] && found[tok] == 0 {
			t.Errorf("token %d published, never acked or purged, not found after reopen", tok)
		}
	}
	for tok, n := range found {
		if n > 1 {
			t.Errorf("token %d found %d times after reopen", tok, n)
		}
	}
	if len(l.bad) > 0 {
		t.Fatalf("after reopen: %q", l.bad[:min(len(l.bad), 5)])
	}
	t.Logf("pulled %d values, saw %d dead, found %d after reopen", l.pulled, l.deadSeen, len(found))
}

// TestSortedFaultRaces is TestSortedCloseRaces on a file system that fails
// one operation (a write, fsync, open, remove, rename, directory fsync, or
// tidwall/wal's batch write or front truncation, whichever comes next) at a
// random moment of the race: every call answers
// nil, ErrClosed or the failure; once a write of the log answered it, every
// write begun after fails too (a TryPull too, never ErrEmpty); and the
// queue reopened on the real file system holds every value whose Publish
// returned nil and that no ack or purge took, and none whose ack or purge
// returned nil, each with its own payload under its own key.
func TestSortedFaultRaces(t *testing.T) {
	sd := seed.Take(t, "./queue")
	rounds := 10
	if testing.Short() {
		rounds = 3
	}
	for i := range rounds {
		for _, mode := range []queue.SyncMode{queue.SyncAlways, queue.SyncInterval, queue.SyncNever} {
			rng := rand.New(rand.NewPCG(sd, uint64(i*3+int(mode))))
			clk := fakeclock.New()
			fsys := faultfs.New(0)
			so := raceSortedOptions(mode, clk, fsys)
			dir := t.TempDir()
			s, err := queue.OpenSorted[int64](dir, &so)
			if err != nil {
				t.Fatal(err)
			}
			l := sortedRaceByToken(t, rng, s, fsys)
			if hit, ok := fsys.Hit(); ok {
				t.Logf("round %d mode %v: failed %s %s, poisoned %v", i, mode, hit.Kind, hit.Path, l.poisoned.Load())
			}
			so.FS = nil
			if s, err = queue.OpenSorted[int64](dir, &so); err != nil {
				t.Fatal(err)
			}
			clk.Advance(2 * time.Hour)
			checkSortedAfterRace(t, s, l)
		}
	}
}

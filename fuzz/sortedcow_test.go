package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSortedSnapshotsBesidePublishAndPull writes snapshots of a sorted
// queue while publishers insert values at random sort keys into keys of
// hundreds of values (so that a key's chunks split and values land in the
// middle of shared chunks) and a puller acks some batches and returns the
// others (their values go back into the middle of their keys). A snapshot
// is encoded without the queue's lock, from copy-on-write views of the
// index that the publishers and the puller keep changing; under -race
// this is also a race test of those views. At crash images taken between
// phases, and after a clean Close, the queue must hold exactly the values
// published and not acked, each once, and every batch must come in sort
// order.
func TestSortedSnapshotsBesidePublishAndPull(t *testing.T) {
	rng, _ := testRand(t)
	dir := t.TempDir()
	o := queue.SortedOptions{
		Options: queue.Options{Sync: queue.SyncNever, SegmentSize: 32 << 10, MaxDeliveries: -1,
			AckTimeout: time.Hour, ManualRequeue: true},
		CacheBytes: 16 << 10, // most payloads are read back from the log
	}
	// A compactor goroutine snapshots while the others work; no compaction
	// runs while a crash image is copied.
	testhook.SetManualCompaction(&o.Options)
	s, err := queue.OpenSorted[int64](dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	w := &sortedWork{s: s, live: make(map[string]bool)}
	phases, perPhase := scaled(4, 2), scaled(600, 3)
	for phase := range phases {
		w.phase(t, rng.Uint64(), phase, perPhase)
		w.checkImage(t, dir, fmt.Sprintf("phase %d", phase))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w.checkImage(t, dir, "after Close")
	t.Logf("%d phases, %d values live, %d acked, %d returned, %d snapshots",
		phases, len(w.live), w.acked, w.returned, w.snapshots)
}

// sortedWork is what the publishers and the puller did.
type sortedWork struct {
	s  *queue.Sorted[int64]
	mu sync.Mutex
	// live holds the tokens published and not acked.
	live                       map[string]bool
	acked, returned, snapshots int
}

// phase runs two publishers of n values each, a puller and a compactor
// side by side, and returns once the publishers are done and the puller
// and the compactor have stopped.
func (w *sortedWork) phase(t *testing.T, seed uint64, phase, n int) {
	t.Helper()
	var pubs, others sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for p := range 2 {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			errs <- w.publish(rand.New(rand.NewPCG(seed, uint64(p))), fmt.Sprintf("p%d.%d", phase, p), n)
		}()
	}
	others.Add(2)
	go func() { defer others.Done(); errs <- w.pull(rand.New(rand.NewPCG(seed, 9)), stop) }()
	go func() { defer others.Done(); errs <- w.compact(stop) }()
	pubs.Wait()
	close(stop)
	others.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// publish publishes n values to four keys at random sort keys.
func (w *sortedWork) publish(rng *rand.Rand, prefix string, n int) error {
	for i := range n {
		tok := fmt.Sprintf("%s-%d", prefix, i)
		w.mu.Lock()
		w.live[tok] = true // before the publish: the puller may get it at once
		w.mu.Unlock()
		key := fmt.Sprintf("k%d", rng.IntN(4))
		if err := w.s.Publish(context.Background(), rng.Int64N(1000), key, payload(tok, 40+rng.IntN(200))); err != nil {
			return fmt.Errorf("publish %s: %w", tok, err)
		}
	}
	return nil
}

// pull pulls one key at a time until stop, acking about one in twelve and
// returning the others, so that keys grow to hundreds of values.
func (w *sortedWork) pull(rng *rand.Rand, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		bs, err := w.s.TryPull(1)
		if errors.Is(err, queue.ErrEmpty) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		for _, b := range bs {
			if err := checkBatch(b); err != nil {
				return err
			}
			if rng.IntN(12) > 0 {
				if err := b.Nack(0); err != nil {
					return fmt.Errorf("nack: %w", err)
				}
				w.returned++
				continue
			}
			if err := b.Ack(); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
			w.mu.Lock()
			for _, v := range b.Values {
				delete(w.live, tokenOf(v.Payload))
			}
			w.acked++
			w.mu.Unlock()
		}
	}
}

// checkBatch checks that a batch's values are whole and in sort order.
func checkBatch(b *queue.Batch[int64]) error {
	for i, v := range b.Values {
		if tok := tokenOf(v.Payload); len(tok) == len(v.Payload) || string(v.Payload[:len(tok)+1]) != tok+"|" {
			return fmt.Errorf("key %s: value %d has payload %q", b.Key, i, v.Payload)
		}
		if i > 0 && v.Sort < b.Values[i-1].Sort {
			return fmt.Errorf("key %s: value %d at sort key %d after %d", b.Key, i, v.Sort, b.Values[i-1].Sort)
		}
	}
	return nil
}

// compact takes snapshots until stop.
func (w *sortedWork) compact(stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := w.s.Compact(); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		w.snapshots++
	}
}

// checkImage drains a copy of dir, as a crash leaves it, and compares
// what it holds with the values published and not acked.
func (w *sortedWork) checkImage(t *testing.T, dir, what string) {
	t.Helper()
	img := scratchDir(t)
	if err := copyDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := queue.SortedOptions{Options: drainOptions()}
	s, err := queue.OpenSorted[int64](img, &o)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer s.Close()
	if _, err := s.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int)
	for {
		bs, err := s.TryPull(1024)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, b := range bs {
			if err := checkBatch(b); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for _, v := range b.Values {
				got[tokenOf(v.Payload)]++
			}
		}
	}
	for tok, n := range got {
		if n != 1 || !w.live[tok] {
			t.Fatalf("%s: %s drained %d times (published and not acked: %v)", what, tok, n, w.live[tok])
		}
	}
	if len(got) != len(w.live) {
		var missing []string
		for tok := range w.live {
			if got[tok] == 0 {
				missing = append(missing, tok)
			}
		}
		slices.Sort(missing)
		t.Fatalf("%s: %d values drained, want %d; missing %v", what, len(got), len(w.live), missing)
	}
}

package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSortedSnapshotThenLogCut is TestSnapshotThenLogCut for a sorted and
// a windowed queue: values published, pulled in batches that are acked,
// dead-lettered, nacked or kept; a snapshot; more; then the log cut at
// every entry boundary and in the middle of every entry after the
// snapshot. A plain open must deliver every value whose publish record
// survived and whose batch's ack did not, each with its bytes, and none
// whose ack survived. With -short or -race, at the entries whose first
// LSN is a multiple of three (fuzz/ci.sh runs every cut without the
// detector).
func TestSortedSnapshotThenLogCut(t *testing.T) {
	t.Run("sorted", func(t *testing.T) {
		rng, _ := testRand(t)
		open := func(dir string, o queue.Options) (*queue.Sorted[int64], error) {
			return queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
		}
		sortedCuts(t, sortedSnapHistory(t, rng, open, func(i int) int64 { return int64(i % 7) }, 0), open)
	})
	t.Run("windowed", func(t *testing.T) {
		rng, _ := testRand(t)
		open := func(dir string, o queue.Options) (*queue.Sorted[time.Time], error) {
			w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: time.Minute})
			if err != nil {
				return nil, err
			}
			return w.Sorted, nil
		}
		sortedCuts(t, sortedSnapHistory(t, rng, open, func(i int) time.Time { return time.Unix(int64(i), 0) }, time.Minute), open)
	})
}

// sortedCuts cuts h's log after its snapshot in every way (see
// TestSortedSnapshotThenLogCut) and checks each image.
func sortedCuts[K queue.SortKey](t *testing.T, h *snapHist, open func(string, queue.Options) (*queue.Sorted[K], error)) {
	t.Helper()
	segs := segmentFiles(h.img)
	cuts := 0
	for si, seg := range segs {
		for _, e := range parseSegment(h.img[seg]) {
			if e.first <= h.snapLSN || ((testing.Short() || raceEnabled) && e.first%3 != 0) {
				continue
			}
			for _, at := range []struct {
				name string
				size int64
			}{{"before the entry", e.off}, {"mid-entry", (e.off + e.end) / 2}} {
				img := maps(h.img)
				img[seg] = img[seg][:at.size]
				for _, later := range segs[si+1:] {
					delete(img, later)
				}
				checkSortedCut(t, fmt.Sprintf("%s %s of LSN %d", seg, at.name, e.first), h, img, e.first-1, open)
				cuts++
			}
		}
	}
	t.Logf("%d cuts after snapshot LSN %d", cuts, h.snapLSN)
}

// sortedSnapHistory runs a history of a sorted queue opened with open
// (values of sort keys mk(i) over eleven keys), with one Compact in the
// middle, and returns its crash image and what each value went through.
// A windowed queue's clock moves on by wait before each pull.
func sortedSnapHistory[K queue.SortKey](t *testing.T, rng *rand.Rand, open func(string, queue.Options) (*queue.Sorted[K], error),
	mk func(int) K, wait time.Duration) *snapHist {
	t.Helper()
	dir := scratchDir(t)
	h := &snapHist{payloads: map[string][]byte{}, enqLSN: map[string]uint64{}, ackLSN: map[string]uint64{}}
	clock := newManualClock()
	o := queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true, AckTimeout: time.Hour,
		MaxDeliveries: 5, Clock: clock}
	testhook.SetManualCompaction(&o)
	s, err := open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	round := func(count int) {
		for range count {
			if rng.IntN(3) > 0 {
				tok := fmt.Sprintf("V%d", n)
				p := payload(tok, 30+rng.IntN(150))
				if err := s.Publish(context.Background(), mk(n), fmt.Sprintf("k%d", rng.IntN(11)), p); err != nil {
					t.Fatal(err)
				}
				h.payloads[tok], h.enqLSN[tok] = p, s.Stats().LastLSN
				n++
				continue
			}
			clock.Advance(wait)
			bs, err := s.TryPull(2)
			if errors.Is(err, queue.ErrEmpty) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				sortedSettle(t, s, rng, b, h)
			}
		}
	}
	round(150)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	h.snapLSN = s.Stats().LastLSN
	round(90)
	if h.img, err = quietDir(dir); err != nil {
		t.Fatal(err)
	}
	snaps := snapshotFiles(h.img)
	if _, err := fmt.Sscanf(snaps[len(snaps)-1], "snapshot-%d.snap", &h.snapLSN); err != nil {
		t.Fatal(err)
	}
	return h
}

// sortedSettle acks, dead-letters, nacks or keeps the batch b, noting the
// ack's LSN for each of its values.
func sortedSettle[K queue.SortKey](t *testing.T, s *queue.Sorted[K], rng *rand.Rand, b *queue.Batch[K], h *snapHist) {
	t.Helper()
	var err error
	switch rng.IntN(4) {
	case 0:
		if err = b.Ack(); err == nil {
			for _, v := range b.Values {
				h.ackLSN[tokenOf(v.Payload)] = s.Stats().LastLSN
			}
		}
	case 1:
		err = b.DeadLetter("poison")
	case 2:
		err = b.Nack(0)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// checkSortedCut opens img, whose log keeps the records up to LSN keep,
// plainly, pulls every value (dead ones requeued first) and checks them
// against h.
func checkSortedCut[K queue.SortKey](t *testing.T, name string, h *snapHist, img map[string][]byte, keep uint64,
	open func(string, queue.Options) (*queue.Sorted[K], error)) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	s, err := open(dir, drainOptions())
	if err != nil {
		t.Fatalf("%s: open: %v", name, err)
	}
	defer s.Close()
	if _, err := s.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequeueAllDead(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for {
		bs, err := s.TryPull(1024)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("%s: pull: %v", name, err)
		}
		for _, b := range bs {
			for _, v := range b.Values {
				tok := tokenOf(v.Payload)
				if !bytes.Equal(v.Payload, h.payloads[tok]) {
					t.Fatalf("%s: value %s delivered with %d wrong bytes", name, tok, len(v.Payload))
				}
				got[tok]++
			}
		}
	}
	for tok, lsn := range h.enqLSN {
		acked := h.ackLSN[tok] != 0 && h.ackLSN[tok] <= keep
		switch {
		case got[tok] > 1:
			t.Errorf("%s: value %s delivered %d times", name, tok, got[tok])
		case acked && got[tok] > 0:
			t.Errorf("%s: value %s, acked at LSN %d, came back", name, tok, h.ackLSN[tok])
		case !acked && lsn <= keep && got[tok] == 0:
			t.Errorf("%s: value %s, published at LSN %d, lost", name, tok, lsn)
		}
	}
}

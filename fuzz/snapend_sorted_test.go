package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// TestSortedLogEndsBeforeSnapshot is TestLogEndsBeforeSnapshot for a sorted
// queue whose snapshot holds pending values, leased batches, a key held by
// a nack delay and dead values: the last segment cut below the snapshot's
// LSN must be refused with ErrCorrupt, and a salvage must deliver every
// value whose publish survived and was not acked, each once, each with its
// own payload under its own key and sort key, and never an empty or
// foreign one.
func TestSortedLogEndsBeforeSnapshot(t *testing.T) {
	rng, _ := testRand(t)
	img, early, want := sortedSnapEndImage(t, rng)
	for _, c := range snapEndCuts(t, img) {
		t.Run(c.name, func(t *testing.T) {
			cut := maps(img)
			c.cut(cut)
			checkSortedRefused(t, cut)
			checkSortedSalvage(t, cut, early, want)
		})
	}
}

// sortedValueToken names a published value: its key and sort key are in
// its token, so a payload delivered under another key or sort key shows.
func sortedValueToken(i int, key string, sort int64) string {
	return fmt.Sprintf("V%d/%s/%d", i, key, sort)
}

// sortedSnapEndImage builds a crash image of a sorted queue whose newest
// snapshot reflects the last record of the log. It returns the image, the
// tokens of the values published before the first compaction and not
// acked (their records lie before the last segment: a salvage must keep
// them), and the payload of every value published.
func sortedSnapEndImage(t *testing.T, rng *rand.Rand) (map[string][]byte, map[string]bool, map[string][]byte) {
	t.Helper()
	dir, s := openSortedImage(t)
	defer s.Close()
	want := map[string][]byte{}
	i := 0
	publish := func(key string) string {
		t.Helper()
		sort := int64(rng.IntN(7) - 3)
		tok := sortedValueToken(i, key, sort)
		i++
		p := payload(tok, 40+rng.IntN(120))
		if err := s.Publish(context.Background(), sort, key, p); err != nil {
			t.Fatal(err)
		}
		want[tok] = p
		return tok
	}
	early := map[string]bool{}
	for n := 0; n < 120; n++ {
		early[publish(fmt.Sprintf("k%d", n%12))] = true
	}
	// Twelve keys: ack three, dead-letter three, nack one with a delay,
	// nack one, leave four leased.
	bs, err := s.TryPull(1 << 20)
	if err != nil || len(bs) != 12 {
		t.Fatalf("pull: %d batches, %v", len(bs), err)
	}
	for j, b := range bs {
		switch {
		case j < 3:
			err = b.Ack()
			for _, v := range b.Values {
				delete(early, tokenOf(v.Payload))
			}
		case j < 6:
			err = b.DeadLetter("test")
		case j == 6:
			err = b.Nack(time.Hour)
		case j == 7:
			err = b.Nack(0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	// Values in the last segment, which the cuts lose; the snapshot holds
	// them as pending. Payload sizes are random: more come until the last
	// segment holds three entries.
	for n := 0; ; n++ {
		publish(fmt.Sprintf("k%d", n%15))
		if n < 40 {
			continue
		}
		if err := s.Compact(); err != nil {
			t.Fatal(err)
		}
		img, err := quietDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if segs := segmentFiles(img); len(parseSegment(img[segs[len(segs)-1]])) >= 3 {
			if len(snapshotFiles(img)) != 1 || len(segmentFiles(img)) < 3 {
				t.Fatalf("image has %d snapshots, %d segments", len(snapshotFiles(img)), len(segmentFiles(img)))
			}
			return img, early, want
		}
		if n > 200 {
			t.Fatalf("the last segment never held three entries")
		}
	}
}

// checkSortedRefused checks that OpenSorted and Verify report the image as
// corrupt, name the way out, and leave every file as it was, and that a
// read-only OpenSorted refuses it too.
func checkSortedRefused(t *testing.T, img map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{})
	if err == nil {
		s.Close()
		t.Fatalf("OpenSorted succeeded on a log that ends before its snapshot; Recovery: %+v", s.Recovery())
	}
	if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), "walq repair") {
		t.Fatalf("OpenSorted: %v; want ErrCorrupt naming walq repair", err)
	}
	after, rerr := readDir(dir)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !sameFiles(img, after) {
		t.Fatalf("a refused OpenSorted changed the directory")
	}
	if _, err := queue.Verify(dir, nil); !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("Verify: %v; want ErrCorrupt", err)
	}
	// What walq dlq list and walq stats open: it must not take the lost
	// records for a torn tail and show values whose records are gone.
	r, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{ReadOnly: true}})
	if err == nil {
		st := r.Stats()
		r.Close()
		t.Fatalf("read-only OpenSorted succeeded on a log that ends before its snapshot: %d pending, %d dead", st.SortedPending, st.SortedDead)
	}
	if !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("read-only OpenSorted: %v; want ErrCorrupt", err)
	}
}

// checkSortedSalvage opens the image with Salvage, requeues the dead
// values and the leased batches, and pulls everything, checking each
// value; then a reopen without Salvage must be clean and hold nothing.
func checkSortedSalvage(t *testing.T, img map[string][]byte, early map[string]bool, want map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	o.Salvage = true
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		t.Fatalf("OpenSorted with Salvage: %v", err)
	}
	if _, err := s.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequeueAllDead(); err != nil {
		t.Fatal(err)
	}
	pending := s.Stats().SortedPending
	got := map[string]bool{}
	for {
		bs, err := s.TryPull(1 << 20)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("pull after %d values: %v", len(got), err)
		}
		for _, b := range bs {
			for _, v := range b.Values {
				tok := tokenOf(v.Payload)
				if p, ok := want[tok]; !ok || !bytes.Equal(p, v.Payload) || !strings.HasSuffix(tok, fmt.Sprintf("/%s/%d", b.Key, v.Sort)) {
					t.Fatalf("value of key %q sort %d delivered with a wrong payload of %d bytes %q", b.Key, v.Sort, len(v.Payload), v.Payload[:min(len(v.Payload), 24)])
				}
				if got[tok] {
					t.Fatalf("value %s delivered twice", tok)
				}
				got[tok] = true
			}
			if err := b.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for tok := range early {
		if !got[tok] {
			t.Errorf("value %s, published before the first compaction and never acked, was lost by the salvage", tok)
		}
	}
	t.Logf("salvaged: %d values delivered, %d of them from before the first compaction; recovery %+v", len(got), len(early), s.Recovery())
	if len(got) != pending {
		t.Errorf("Stats said %d pending, the pulls returned %d", pending, len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := drainSorted(dir)
	if err != nil || len(d.tokens) != 0 {
		t.Fatalf("reopen without Salvage after the salvage and a full drain: %d values, %v", len(d.tokens), err)
	}
}

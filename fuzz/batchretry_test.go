package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestBatchRetryAfterCrash cuts the log inside an EnqueueBatch with
// producer ids larger than a group of the log (a crash before it
// returned): at every entry boundary and at fractions of it. It reopens,
// and retries the
// batch as a producer does: the retry succeeds or fails with ErrDuplicate,
// and after it every item is in the queue exactly once. A crash that kept
// a prefix of the batch would make the retry refuse the batch and drop the
// rest.
func TestBatchRetryAfterCrash(t *testing.T) {
	dir := scratchDir(t)
	o := &queue.Options{Sync: queue.SyncNever, SegmentSize: 64 << 20}
	q := mustOpen(t, dir, o)
	mustEnqueue(t, q, payload("first", 20))
	before, err := quietDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]queue.Item, 4500) // about 4.5 MiB: more than the log's 4 MiB group
	for i := range items {
		tok := fmt.Sprintf("b%04d", i)
		items[i] = queue.Item{ID: tok, Payload: payload(tok, 1000)}
	}
	if _, err := q.EnqueueBatch(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	after, err := quietDir(dir)
	q.Close()
	if err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(after)
	if len(segs) != 1 {
		t.Fatalf("%d segments; the test cuts one", len(segs))
	}
	last := segs[0]
	from, to := len(before[last]), len(after[last])
	cuts := []int{from + 1, from + (to-from)/3, from + (to-from)/2, to - 1, to}
	for _, e := range parseSegment(after[last]) {
		if int(e.end) > from {
			cuts = append(cuts, int(e.end)) // a crash between two entries of the batch
		}
	}
	for _, cut := range cuts {
		img := maps(after)
		img[last] = img[last][:cut]
		d := filepath.Join(scratchDir(t), fmt.Sprint("cut", cut))
		if err := writeDir(d, img); err != nil {
			t.Fatal(err)
		}
		retryBatch(t, d, items, cut)
	}
}

// retryBatch opens d, enqueues items again and checks that the queue then
// holds the first message and each item once: the retry enqueued all of
// them, or refused them all as duplicates because all were there.
func retryBatch(t *testing.T, d string, items []queue.Item, cut int) {
	t.Helper()
	o := drainOptions()
	q, err := queue.Open(d, &o)
	if err != nil {
		t.Fatalf("cut %d: Open: %v", cut, err)
	}
	defer q.Close()
	_, err = q.EnqueueBatch(context.Background(), items)
	if err != nil && !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("cut %d: retry: %v", cut, err)
	}
	if got, want := q.Stats().Ready, int64(len(items)+1); got != want {
		t.Fatalf("cut %d: the retry returned %v and the queue holds %d messages, want %d: items were dropped", cut, err, got, want)
	}
}

package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	stdmaps "maps"
	"slices"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestLongLivedThroughChurn keeps a few messages alive (dead letters,
// messages nacked with a long delay, messages under a long lease, and the
// ids of acked ones in the dedup window) while thousands of others pass
// through the queue around them, with small segments and a compaction
// every other round: the long-lived ones fall far behind the message table's
// window (index/seqs.go spills them into its B-tree), compactions copy
// them forward again and again, and the log is cut behind them. At
// crash images taken between rounds (the directory as a kill -9 leaves it)
// and after a clean Close, every long-lived message must come back whole
// (payload and headers), in its state, exactly once, with nothing else;
// every id, live or acked within DedupWindow, must still refuse a
// duplicate.
func TestLongLivedThroughChurn(t *testing.T) {
	const pad = 300
	dir := t.TempDir()
	opts := queue.Options{
		Sync: queue.SyncNever, SegmentSize: 16 << 10, SnapshotBytes: 64 << 10, DedupWindow: time.Hour,
		MaxDeliveries: -1, AckTimeout: time.Hour, ManualRequeue: true,
	}
	// The test compacts between rounds itself, so that no compaction runs
	// while a crash image is copied.
	testhook.SetManualCompaction(&opts)
	q := mustOpen(t, dir, &opts)
	defer func() { q.Close() }()
	ll := newLongLived(t, q, pad)

	rounds, perRound := scaled(40, 4), 150
	images := 0
	for round := range rounds {
		churnRound(t, q, round, perRound, pad)
		if round%2 == 1 {
			if err := q.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		if round%5 == 4 {
			ll.checkImage(t, dir, fmt.Sprintf("round %d", round))
			images++
		}
	}
	if q.Stats().SnapshotLSN == 0 {
		t.Fatal("no snapshot was taken: the test no longer covers compaction")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	ll.checkImage(t, dir, "after Close")
	t.Logf("%d rounds of %d messages, %d crash images, snapshot at LSN %d", rounds, perRound, images, q.Stats().SnapshotLSN)
}

// longLived is what the test keeps alive beside the churn.
type longLived struct {
	pad     int
	want    map[string]string // token -> "dead", "delayed", "leased"
	headers map[string]string // the headers every long-lived message carries
	acked   []string          // ids acked within the dedup window
}

func newLongLived(t *testing.T, q *queue.Queue, pad int) *longLived {
	t.Helper()
	ctx := context.Background()
	ll := &longLived{pad: pad, want: make(map[string]string), headers: map[string]string{"kind": "long-lived"}}
	for i := range 30 {
		tok := fmt.Sprintf("old-%02d", i)
		if _, err := q.Enqueue(ctx, payload(tok, pad), queue.WithID(tok), queue.WithHeaders(ll.headers)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		tok := fmt.Sprintf("gone-%02d", i)
		if _, err := q.Enqueue(ctx, payload(tok, pad), queue.WithID(tok)); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := q.DequeueBatch(ctx, 40)
	if err != nil || len(ms) != 40 {
		t.Fatalf("DequeueBatch: %d messages, %v", len(ms), err)
	}
	for i, m := range ms {
		tok := tokenOf(m.Payload)
		switch {
		case i >= 30:
			err, ll.acked = m.Ack(), append(ll.acked, tok)
		case i%3 == 0:
			err, ll.want[tok] = m.DeadLetter("kept"), "dead"
		case i%3 == 1:
			err, ll.want[tok] = m.Nack(time.Hour), "delayed"
		default:
			ll.want[tok] = "leased"
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return ll
}

// churnRound enqueues, delivers and acks n messages.
func churnRound(t *testing.T, q *queue.Queue, round, n, pad int) {
	t.Helper()
	ctx := context.Background()
	items := make([]queue.Item, n)
	for i := range items {
		items[i] = queue.Item{Payload: payload(fmt.Sprintf("c%d-%d", round, i), pad)}
	}
	if _, err := q.EnqueueBatch(ctx, items); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; {
		ms, err := q.DequeueBatch(ctx, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if tok := tokenOf(m.Payload); tok[0] != 'c' {
				t.Fatalf("round %d: delivered long-lived %s", round, tok)
			}
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		got += len(ms)
	}
}

// checkImage copies dir as a crash leaves it and checks the copy twice:
// dedup on the live clock, then the long-lived messages on a clock a day
// ahead.
func (ll *longLived) checkImage(t *testing.T, dir, what string) {
	t.Helper()
	img := scratchDir(t)
	if err := copyDir(dir, img); err != nil {
		t.Fatal(err)
	}
	dup := scratchDir(t)
	if err := copyDir(img, dup); err != nil {
		t.Fatal(err)
	}
	ll.checkDedup(t, dup, what)
	ll.checkMessages(t, img, what)
}

func (ll *longLived) checkDedup(t *testing.T, dir, what string) {
	t.Helper()
	q := mustOpen(t, dir, &queue.Options{Sync: queue.SyncNever, DedupWindow: time.Hour})
	defer q.Close()
	for _, tok := range append(slices.Sorted(stdmaps.Keys(ll.want)), ll.acked...) {
		_, err := q.Enqueue(context.Background(), []byte("duplicate"), queue.WithID(tok))
		if !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("%s: enqueue of id %s: %v, want ErrDuplicate", what, tok, err)
		}
	}
}

func (ll *longLived) checkMessages(t *testing.T, dir, what string) {
	t.Helper()
	o := drainOptions()
	q := mustOpen(t, dir, &o)
	defer q.Close()
	st := q.Stats()
	count := func(s string) (n int64) {
		for _, v := range ll.want {
			if v == s {
				n++
			}
		}
		return n
	}
	if st.Dead != count("dead") {
		t.Fatalf("%s: %d dead, want %d (stats %+v)", what, st.Dead, count("dead"), st)
	}
	// The crash ended the leases (or a clean Close kept them, run out by
	// the drain's clock); the delays have passed by the drain's clock.
	if _, err := q.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	dls, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatalf("%s: DeadLetters: %v", what, err)
	}
	got := make(map[string]string)
	for _, d := range dls {
		ll.checkBody(t, what, d.Payload, d.Headers)
		got[tokenOf(d.Payload)] = "dead"
	}
	if _, err := q.RequeueAllDead(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		tok := tokenOf(m.Payload)
		ll.checkBody(t, what, m.Payload, m.Headers)
		if _, ok := got[tok]; ok && got[tok] != "dead" {
			t.Fatalf("%s: %s delivered twice", what, tok)
		}
		if got[tok] == "" {
			got[tok] = ll.want[tok] // leased or delayed: the drain does not tell them apart
		}
		got[tok] += "+"
	}
	for tok, state := range ll.want {
		if got[tok] != state+"+" {
			t.Fatalf("%s: %s came back as %q, want %q then delivered once", what, tok, got[tok], state)
		}
	}
	if len(got) != len(ll.want) {
		t.Fatalf("%s: %d messages came back, want %d: %v", what, len(got), len(ll.want), got)
	}
}

// checkBody checks that a long-lived message's payload and headers are
// its own, whole.
func (ll *longLived) checkBody(t *testing.T, what string, p []byte, h map[string]string) {
	t.Helper()
	tok := tokenOf(p)
	if _, ok := ll.want[tok]; !ok {
		t.Fatalf("%s: unexpected message %q (%d bytes)", what, tok, len(p))
	}
	if string(p) != string(payload(tok, ll.pad)) {
		t.Fatalf("%s: payload of %s is not its own: %q", what, tok, p)
	}
	if !stdmaps.Equal(h, ll.headers) {
		t.Fatalf("%s: headers of %s: %v", what, tok, h)
	}
}

package fuzz_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestBacklogCopiedForwardKeepsOrder keeps a backlog of never-delivered
// messages in the queue while a few others are delivered and nacked over
// and over: the log fills with lease and nack records around a backlog
// that holds it back, so every compaction copies the backlog forward (the
// first time out of the cursor's region, then as indexed entries, copies
// of copies). At crash images between compactions and after a clean
// Close, a drain must return the nacked messages first, then the whole
// backlog in enqueue order, each once, each with its own payload and
// headers, and each backlog message as a first delivery.
func TestBacklogCopiedForwardKeepsOrder(t *testing.T) {
	const pad, backlog, busy = 40, 120, 20
	dir := t.TempDir()
	opts := queue.Options{Sync: queue.SyncNever, SegmentSize: 8 << 10, MaxDeliveries: -1,
		AckTimeout: time.Hour, ManualRequeue: true}
	testhook.SetManualCompaction(&opts) // no compaction while an image is copied
	q := mustOpen(t, dir, &opts)
	defer func() { q.Close() }()
	ctx := context.Background()
	var backlogToks, want []string
	for i := range backlog {
		tok := fmt.Sprintf("backlog-%03d", i)
		mustEnqueue(t, q, payload(tok, pad), queue.WithHeaders(map[string]string{"n": tok}))
		backlogToks = append(backlogToks, tok)
	}
	// The busy messages come after the backlog, with a short delay: once
	// due they go before the never-delivered backlog, and once nacked they
	// are ready again and still do, although their sequence numbers are
	// higher than those of the backlog's copies.
	for i := range busy {
		tok := fmt.Sprintf("busy-%02d", i)
		mustEnqueue(t, q, payload(tok, pad), queue.WithDelay(time.Millisecond))
		want = append(want, tok)
	}
	want = append(want, backlogToks...)
	time.Sleep(5 * time.Millisecond)
	rounds := scaled(120, 2)
	for round := range rounds {
		ms, err := q.DequeueBatch(ctx, busy)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if tok := tokenOf(m.Payload); tok[:4] != "busy" {
				t.Fatalf("round %d: delivered %s before the busy messages", round, tok)
			}
		}
		if err := ms.Nack(0); err != nil {
			t.Fatal(err)
		}
		if round%4 == 3 {
			if err := q.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		if round%12 == 11 {
			checkBacklogImage(t, dir, want, pad, fmt.Sprintf("round %d", round))
		}
	}
	st := q.Stats()
	if st.Moved < backlog {
		t.Fatalf("%d messages copied forward: the backlog was never copied", st.Moved)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	checkBacklogImage(t, dir, want, pad, "after Close")
	t.Logf("%d rounds, %d copies forward, log of %d segments", rounds, st.Moved, len(st.Segments))
}

// checkBacklogImage drains a copy of dir, as a crash leaves it, and checks
// that it returns want in order, with right payloads, headers and
// delivery counts.
func checkBacklogImage(t *testing.T, dir string, want []string, pad int, what string) {
	t.Helper()
	img := scratchDir(t)
	if err := copyDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	q := mustOpen(t, img, &o)
	defer q.Close()
	for i, tok := range want {
		m, err := q.TryDequeue()
		if err != nil {
			t.Fatalf("%s: delivery %d (want %s): %v", what, i, tok, err)
		}
		if got := tokenOf(m.Payload); got != tok {
			t.Fatalf("%s: delivery %d is %s, want %s", what, i, got, tok)
		}
		if string(m.Payload) != string(payload(tok, pad)) {
			t.Fatalf("%s: payload of %s is not its own: %q", what, tok, m.Payload)
		}
		if tok[:4] == "back" && (m.Deliveries != 1 || m.Headers["n"] != tok) {
			t.Fatalf("%s: %s delivered with count %d and headers %v, want a first delivery with its header",
				what, tok, m.Deliveries, m.Headers)
		}
	}
	if m, err := q.TryDequeue(); err == nil {
		t.Fatalf("%s: %s delivered after the backlog", what, tokenOf(m.Payload))
	}
}

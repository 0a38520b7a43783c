package fuzz_test

import (
	"fmt"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSalvageRedoesDeadMarks: damage takes the entry that holds A's first
// lease, A's dead-letter is intact after it, and so is a later requeue or
// purge of the dead set, and perhaps a redelivery of A and its ack. A
// salvage marks A dead from its dead-letter; the later records must then
// apply to that mark as they did to the live queue: a requeued A is
// pending again (delivered once more, unless its redelivery was acked),
// a purged A is gone. What the salvage keeps must outlast a compaction
// and a plain reopen.
func TestSalvageRedoesDeadMarks(t *testing.T) {
	for _, c := range []struct {
		name  string
		after func(t *testing.T, q *queue.Queue)
		wantA int // deliveries of A in the drain after the salvage
	}{
		{"requeue", func(t *testing.T, q *queue.Queue) { mustChangeDead(t, q.RequeueAllDead) }, 1},
		{"purge", func(t *testing.T, q *queue.Queue) { mustChangeDead(t, q.PurgeAllDead) }, 0},
		{"requeue, redelivery, ack", func(t *testing.T, q *queue.Queue) {
			mustChangeDead(t, q.RequeueAllDead)
			if err := mustDequeue(t, q, "A").Ack(); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"requeue, redelivery unsettled", func(t *testing.T, q *queue.Queue) {
			mustChangeDead(t, q.RequeueAllDead)
			mustDequeue(t, q, "A")
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := scratchDir(t)
			q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
			defer q.Close()
			mustEnqueue(t, q, payload("A", 10))
			mustEnqueue(t, q, payload("B", 10))
			m := mustDequeue(t, q, "A") // lease LSN 3, the lost one
			lost := m.Receipt.Lease
			if err := m.DeadLetter("poison"); err != nil {
				t.Fatal(err)
			}
			mustEnqueue(t, q, payload("C", 10))
			c.after(t, q)
			for i := 0; i < 100; i++ {
				mustEnqueue(t, q, payload("F", 100))
			}
			d := lostEntryImage(t, dir, lost)

			o := drainOptions()
			o.Salvage = true
			q2 := mustOpen(t, d, &o)
			q3 := compactAndReopen(t, q2, d, nil)
			if _, err := q3.RequeueExpired(); err != nil { // a lease held at the crash
				t.Fatal(err)
			}
			count := map[string]int{}
			for _, tok := range drainTokens(t, q3) {
				count[tok]++
			}
			want := map[string]int{"B": 1, "C": 1, "F": 100}
			if c.wantA > 0 {
				want["A"] = c.wantA
			}
			if fmt.Sprint(count) != fmt.Sprint(want) {
				t.Fatalf("delivered %v, want %v (recovery %+v)", count, want, q3.Recovery())
			}
		})
	}
}

// mustDequeue delivers the next message and fails the test unless it is
// token's.
func mustDequeue(t *testing.T, q *queue.Queue, token string) *queue.Message {
	t.Helper()
	m, err := q.TryDequeue()
	if err != nil || tokenOf(m.Payload) != token {
		t.Fatalf("delivery of %s: %v %v", token, m, err)
	}
	return m
}

// mustChangeDead runs a requeue or purge of the whole dead set, which
// must hold one message.
func mustChangeDead(t *testing.T, change func() (int, error)) {
	t.Helper()
	if n, err := change(); err != nil || n != 1 {
		t.Fatalf("changed %d dead letters, %v; want 1", n, err)
	}
}

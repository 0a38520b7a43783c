package fuzz_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestReadOnlySalvageShowsTheSalvage: a read-only salvaging open (ReadOnly
// and Salvage) of a log whose damage took first leases must show what a
// salvage of it would produce: the same dead letters, with their reasons,
// and the same counts. It writes nothing.
func TestReadOnlySalvageShowsTheSalvage(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T, q *queue.Queue) []uint64 // returns the lost LSNs
	}{
		{"jump, dead-letter after A", func(t *testing.T, q *queue.Queue) []uint64 {
			mustEnqueue(t, q, payload("X", 10))
			mustEnqueue(t, q, payload("A", 10))
			x := mustDequeue(t, q, "X")
			mustEnqueue(t, q, payload("B", 10)) // the lease above is written alone
			a := mustDequeue(t, q, "A")
			mustSettle(t, x.DeadLetter("poison"), a.Ack())
			return []uint64{x.Receipt.Lease}
		}},
		{"jump, ack after A", func(t *testing.T, q *queue.Queue) []uint64 {
			mustEnqueue(t, q, payload("X", 10))
			mustEnqueue(t, q, payload("A", 10))
			x := mustDequeue(t, q, "X")
			mustEnqueue(t, q, payload("B", 10))
			a := mustDequeue(t, q, "A")
			mustSettle(t, x.Ack(), a.Ack())
			return []uint64{x.Receipt.Lease}
		}},
		{"jump, unsettled", func(t *testing.T, q *queue.Queue) []uint64 {
			mustEnqueue(t, q, payload("X", 10))
			mustEnqueue(t, q, payload("A", 10))
			x := mustDequeue(t, q, "X")
			mustEnqueue(t, q, payload("B", 10))
			mustSettle(t, mustDequeue(t, q, "A").Ack())
			return []uint64{x.Receipt.Lease}
		}},
		{"first lease, dead-letter", func(t *testing.T, q *queue.Queue) []uint64 {
			mustEnqueue(t, q, payload("A", 10))
			mustEnqueue(t, q, payload("B", 10))
			a := mustDequeue(t, q, "A")
			mustSettle(t, a.DeadLetter("poison"))
			mustEnqueue(t, q, payload("C", 10))
			return []uint64{a.Receipt.Lease}
		}},
		{"first lease, ack", func(t *testing.T, q *queue.Queue) []uint64 {
			mustEnqueue(t, q, payload("A", 10))
			mustEnqueue(t, q, payload("B", 10))
			a := mustDequeue(t, q, "A")
			mustSettle(t, a.Ack())
			mustEnqueue(t, q, payload("C", 10))
			return []uint64{a.Receipt.Lease}
		}},
		{"dead letter's enqueue record", func(t *testing.T, q *queue.Queue) []uint64 {
			mustEnqueue(t, q, payload("W", 10)) // the log does not start at the damage
			mustEnqueue(t, q, payload("X", 10))
			mustEnqueue(t, q, payload("A", 10))
			w := mustDequeue(t, q, "W")
			x := mustDequeue(t, q, "X")
			mustSettle(t, w.Ack(), x.DeadLetter("poison"))
			return []uint64{x.Receipt.Seq}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := scratchDir(t)
			q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
			defer q.Close()
			lost := c.build(t, q)
			for i := 0; i < 100; i++ {
				mustEnqueue(t, q, payload("F", 100))
			}
			d := lostEntryImage(t, dir, lost...)
			ro := filepath.Join(scratchDir(t), "q")
			if err := os.CopyFS(ro, os.DirFS(d)); err != nil {
				t.Fatal(err)
			}

			o := drainOptions()
			o.Salvage = true
			o.ReadOnly = true
			qr := mustOpen(t, ro, &o)
			got := salvageView(t, qr)
			if err := qr.Close(); err != nil {
				t.Fatal(err)
			}
			o.ReadOnly = false
			qw := mustOpen(t, d, &o)
			defer qw.Close()
			want := salvageView(t, qw)
			if got != want {
				t.Fatalf("read-only salvage shows\n%+v\nthe salvage gives\n%+v", got, want)
			}
			again := mustOpen(t, ro, &o) // the read-only open wrote nothing: the damage is still there
			defer again.Close()
			if len(again.Recovery().Log.Salvaged) == 0 {
				t.Fatalf("after the read-only open, the salvage found no damage: %+v", again.Recovery())
			}
		})
	}
}

// view is what TestReadOnlySalvageShowsTheSalvage compares.
type view struct {
	Ready, Delayed, InFlight, Dead int64
	Acked, DeadLettered            uint64
	DeadLetters                    string // tokens and reasons
	Dropped                        string // Recovery.Dropped
	Replay                         string // Recovery's snapshot loaded or set aside, records replayed and skipped
}

func salvageView(t *testing.T, q *queue.Queue) view {
	t.Helper()
	s := q.Stats()
	v := view{Ready: s.Ready, Delayed: s.Delayed, InFlight: s.InFlight, Dead: s.Dead, Acked: s.Acked, DeadLettered: s.DeadLettered}
	dl, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dl {
		v.DeadLetters += tokenOf(d.Payload) + ":" + d.Reason + " "
	}
	v.Dropped = fmt.Sprint(q.Recovery().Dropped)
	return v
}

// mustSettle fails the test at the first of errs that is not nil.
func mustSettle(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

package fuzz_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSalvageKeepsSettlesOfLostLeases: damage takes the log entry that holds
// the lease record of a redelivery, and the ack or dead-letter of that
// delivery, which returned under SyncAlways, is intact after it. A
// salvage must not deliver the message again: the settle record proves
// what became of it, whatever the lost lease said.
func TestSalvageKeepsSettlesOfLostLeases(t *testing.T) {
	for _, settle := range []string{"ack", "dead-letter"} {
		t.Run(settle, func(t *testing.T) {
			dir := scratchDir(t)
			q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
			defer q.Close()
			mustEnqueue(t, q, payload("A", 10)) // LSN 1
			mustEnqueue(t, q, payload("B", 10)) // LSN 2
			m, err := q.TryDequeue()            // lease LSN 3
			if err != nil || tokenOf(m.Payload) != "A" {
				t.Fatalf("first delivery: %v %v", m, err)
			}
			if err := m.Nack(0); err != nil { // LSN 4
				t.Fatal(err)
			}
			if m, err = q.TryDequeue(); err != nil || tokenOf(m.Payload) != "A" { // lease LSN 5
				t.Fatalf("redelivery: %v %v", m, err)
			}
			if settle == "ack" {
				err = m.Ack()
			} else {
				err = m.DeadLetter("poison")
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				mustEnqueue(t, q, payload("F", 100))
			}
			img, err := quietDir(dir) // a crash image: no snapshot after the settle
			if err != nil {
				t.Fatal(err)
			}
			seg := segmentFiles(img)[0]
			var c damageCase
			for _, e := range parseSegment(img[seg]) {
				if e.first == 5 && e.count == 1 {
					c = damageCase{name: "lease 5", file: seg, damage: flipBit(e.end-2, 1)}
				}
			}
			if c.file == "" {
				t.Fatal("the lease of the redelivery is not an entry of its own")
			}
			d := filepath.Join(scratchDir(t), "q")
			if err := writeDir(d, damaged(img, c)); err != nil {
				t.Fatal(err)
			}
			o := drainOptions()
			o.Salvage = true
			q2 := mustOpen(t, d, &o)
			defer q2.Close()
			if s := q2.Recovery().Log.Salvaged; len(s) != 1 || s[0].FirstLSN != 5 || s[0].LastLSN != 5 {
				t.Fatalf("Salvaged = %+v, want LSN 5", s)
			}
			for {
				m, err := q2.TryDequeue()
				if errors.Is(err, queue.ErrEmpty) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if tok := tokenOf(m.Payload); tok == "A" {
					t.Fatalf("A, %sed before the damage, delivered again after the salvage (recovery %+v)",
						settle, q2.Recovery())
				}
			}
			dl, err := q2.DeadLetters(0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"ack": 0, "dead-letter": 1}[settle]; len(dl) != want ||
				(want == 1 && tokenOf(dl[0].Payload) != "A") {
				t.Fatalf("dead letters %+v, want %d (A)", dl, want)
			}
		})
	}
}

package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// lostEntryImage returns a copy of the crash image of dir in which bit
// flips broke the log entries that hold the records at lsns, and nothing
// else: the entries hold those records only.
func lostEntryImage(t *testing.T, dir string, lsns ...uint64) string {
	t.Helper()
	img, err := quietDir(dir) // a crash image: no snapshot after the settle
	if err != nil {
		t.Fatal(err)
	}
	hit := map[uint64]bool{}
	var cs []damageCase
	for _, seg := range segmentFiles(img) {
		for _, e := range parseSegment(img[seg]) {
			n := 0
			for _, lsn := range lsns {
				if lsn >= e.first && lsn < e.first+uint64(e.count) {
					hit[lsn] = true
					n++
				}
			}
			if n > 0 && n != e.count {
				t.Fatalf("the entry of LSNs %d-%d holds other records than %v", e.first, e.first+uint64(e.count)-1, lsns)
			}
			if n > 0 {
				cs = append(cs, damageCase{name: "entry", file: seg, damage: flipBit(e.end-2, 1)})
			}
		}
	}
	if len(hit) != len(lsns) {
		t.Fatalf("LSNs %v are not all in the log", lsns)
	}
	for _, c := range cs {
		img = damaged(img, c)
	}
	d := filepath.Join(scratchDir(t), "q")
	if err := writeDir(d, img); err != nil {
		t.Fatal(err)
	}
	return d
}

// checkDead fails the test unless the dead-letter set holds exactly the
// tokens want, each with the reason "poison".
func checkDead(t *testing.T, what string, got []string, reasons []string, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: dead %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] || reasons[i] != "poison" {
			t.Fatalf("%s: dead %v (reasons %q), want %v with reason poison", what, got, reasons, want)
		}
	}
}

// TestSalvageKeepsSettlesOfLostFirstLeases: damage takes the entry that
// holds the lease record of a message's first delivery, and the ack or
// dead-letter of that delivery is intact after it. The message is still
// pending at the cursor in the replayed state; a salvage must neither
// deliver it again nor lose the messages enqueued after it, and what it
// keeps must outlast the next compaction and a plain reopen. With "after
// X", the damage also took the lease of X, delivered first and never
// settled: X is pending before A, and must be delivered again.
func TestSalvageKeepsSettlesOfLostFirstLeases(t *testing.T) {
	for _, c := range []struct {
		settle string
		x      bool
	}{{"ack", false}, {"dead-letter", false}, {"ack", true}, {"dead-letter", true}} {
		settle := c.settle
		name := settle + map[bool]string{true: "/after X"}[c.x]
		t.Run(name, func(t *testing.T) {
			dir := scratchDir(t)
			q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
			defer q.Close()
			var lost []uint64
			var want []string
			if c.x {
				mustEnqueue(t, q, payload("X", 10)) // LSN 1
				lost, want = []uint64{5}, []string{"X"}
			}
			mustEnqueue(t, q, payload("A", 10))
			mustEnqueue(t, q, payload("B", 10))
			mustEnqueue(t, q, payload("C", 10))
			want = append(want, "B", "C")
			if c.x {
				if m, err := q.TryDequeue(); err != nil || tokenOf(m.Payload) != "X" { // lease LSN 5
					t.Fatalf("first delivery of X: %v %v", m, err)
				}
			}
			m, err := q.TryDequeue() // lease LSN 4, or 6 after X
			if err != nil || tokenOf(m.Payload) != "A" {
				t.Fatalf("first delivery: %v %v", m, err)
			}
			lost = append(lost, m.Receipt.Lease)
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
			d := lostEntryImage(t, dir, lost...)
			wantDead := map[string][]string{"ack": nil, "dead-letter": {"A"}}[settle]

			o := drainOptions()
			o.Salvage = true
			q2 := mustOpen(t, d, &o)
			if s := q2.Recovery().Log.Salvaged; len(s) == 0 || s[0].FirstLSN != lost[0] || s[len(s)-1].LastLSN != lost[len(lost)-1] {
				t.Fatalf("Salvaged = %+v, want LSNs %v", s, lost)
			}
			q3 := compactAndReopen(t, q2, d, wantDead)
			got := drainTokens(t, q3)
			if len(got) != len(want)+100 || !slices.Equal(got[:len(want)], want) || slices.Contains(got, "A") {
				t.Fatalf("delivered %d messages, starting %v, want %v and the 100 fillers, never A (recovery %+v)",
					len(got), got[:min(len(got), 4)], want, q3.Recovery())
			}
		})
	}
}

// compactAndReopen checks the dead set of the salvaged queue q, compacts
// and closes it, reopens dir without Salvage and checks the dead set
// again: what the salvage kept must outlast both.
func compactAndReopen(t *testing.T, q *queue.Queue, dir string, wantDead []string) *queue.Queue {
	t.Helper()
	checkQueueDead(t, "after the salvage", q, wantDead)
	if err := q.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	plain := drainOptions()
	q3 := mustOpen(t, dir, &plain)
	t.Cleanup(func() { _ = q3.Close() })
	checkQueueDead(t, "after a compaction and a plain reopen", q3, wantDead)
	return q3
}

// drainTokens dequeues q until it is empty and returns the tokens of the
// payloads, in delivery order.
func drainTokens(t *testing.T, q *queue.Queue) []string {
	t.Helper()
	var got []string
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tokenOf(m.Payload))
	}
}

// checkQueueDead is checkDead for an ack queue.
func checkQueueDead(t *testing.T, what string, q *queue.Queue, want []string) {
	t.Helper()
	dl, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var toks, reasons []string
	for _, d := range dl {
		toks, reasons = append(toks, tokenOf(d.Payload)), append(reasons, d.Reason)
	}
	checkDead(t, what, toks, reasons, want)
}

// lostPull is a sorted or windowed queue under TestSalvageKeepsSettlesOfLostPulls.
type lostPull[K queue.SortKey] struct {
	open    func(dir string, o queue.Options) (*queue.Sorted[K], error)
	publish func(s *queue.Sorted[K], key string, p []byte, i int64) error
	due     func() // makes every key published so far due
}

// TestSalvageKeepsSettlesOfLostPulls: damage takes the entry that holds a
// sorted (or windowed) batch's pull record, a first pull or a re-pull
// after a Nack, and the batch's ack or dead-letter is intact after it. A
// salvage must settle exactly that batch's values: not deliver them again,
// and keep the key's value published after the pull and another key's.
func TestSalvageKeepsSettlesOfLostPulls(t *testing.T) {
	sorted := lostPull[int64]{
		open: func(dir string, o queue.Options) (*queue.Sorted[int64], error) {
			return queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
		},
		publish: func(s *queue.Sorted[int64], key string, p []byte, i int64) error {
			return s.Publish(context.Background(), i, key, p)
		},
		due: func() {},
	}
	clock := newManualClock()
	windowed := lostPull[time.Time]{
		open: func(dir string, o queue.Options) (*queue.Sorted[time.Time], error) {
			w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: time.Second})
			if err != nil {
				return nil, err
			}
			return w.Sorted, nil
		},
		publish: func(s *queue.Sorted[time.Time], key string, p []byte, i int64) error {
			clock.Advance(time.Millisecond)
			return s.Publish(context.Background(), clock.Now(), key, p)
		},
		due: func() { clock.Advance(2 * time.Second) },
	}
	for _, settle := range []string{"ack", "dead-letter"} {
		for _, repull := range []bool{false, true} {
			name := settle + map[bool]string{false: "/first pull", true: "/re-pull"}[repull]
			t.Run("sorted/"+name, func(t *testing.T) {
				runLostPull(t, sorted, queue.Options{}, settle, repull, "k")
			})
			t.Run("windowed/"+name, func(t *testing.T) {
				runLostPull(t, windowed, queue.Options{Clock: clock}, settle, repull, "k")
			})
			// The empty key is a key like any other: its settle record
			// names it and its values as another key's does.
			t.Run("sorted/empty key/"+name, func(t *testing.T) {
				runLostPull(t, sorted, queue.Options{}, settle, repull, "")
			})
		}
	}
}

// runLostPull settles a batch of key, whose pull record the damage takes.
func runLostPull[K queue.SortKey](t *testing.T, c lostPull[K], o queue.Options, settle string, repull bool, key string) {
	dir := scratchDir(t)
	o.SegmentSize, o.SnapshotBytes, o.ManualRequeue = 4096, 1<<30, true
	s, err := c.open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	publish := func(key, tok string, i int64) {
		t.Helper()
		if err := c.publish(s, key, payload(tok, 10), i); err != nil {
			t.Fatal(err)
		}
	}
	pull := func() *queue.Batch[K] {
		t.Helper()
		bs, err := s.TryPull(1)
		if err != nil || len(bs) != 1 || bs[0].Key != key || len(bs[0].Values) != 1 || tokenOf(bs[0].Values[0].Payload) != "A" {
			t.Fatalf("pull: %v %v, want key %q with A", bs, err, key)
		}
		return bs[0]
	}
	publish(key, "A", 1) // LSN 1
	publish("j", "B", 2) // LSN 2
	c.due()
	b := pull() // LSN 3
	lost := uint64(3)
	if repull {
		if err := b.Nack(0); err != nil { // LSN 4
			t.Fatal(err)
		}
		b, lost = pull(), 5
	}
	publish(key, "C", 3) // after the pull: not in its batch
	if settle == "ack" {
		err = b.Ack()
	} else {
		err = b.DeadLetter("poison")
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 100; i++ {
		publish("f", "F", 10+i)
	}
	d := lostEntryImage(t, dir, lost)
	wantDead := map[string][]string{"ack": nil, "dead-letter": {"A"}}[settle]

	so := drainOptions()
	so.Salvage = true
	s2, err := c.open(d, so)
	if err != nil {
		t.Fatal(err)
	}
	if sv := s2.Recovery().Log.Salvaged; len(sv) != 1 || sv[0].FirstLSN != lost || sv[0].LastLSN != lost {
		t.Fatalf("Salvaged = %+v, want LSN %d", sv, lost)
	}
	checkSortedDead(t, "after the salvage", s2, wantDead)
	if err := s2.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := c.open(d, drainOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	checkSortedDead(t, "after a compaction and a plain reopen", s3, wantDead)
	count := countPulled(t, s3)
	if want := map[string]int{"B": 1, "C": 1, "F": 100}; fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v: A settled before the damage (recovery %+v)", count, want, s3.Recovery())
	}
}

// countPulled pulls s until it is empty and returns how many times each
// token was delivered.
func countPulled[K queue.SortKey](t *testing.T, s *queue.Sorted[K]) map[string]int {
	t.Helper()
	count := map[string]int{}
	for {
		bs, err := s.TryPull(1024)
		if errors.Is(err, queue.ErrEmpty) {
			return count
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			for _, v := range b.Values {
				count[tokenOf(v.Payload)]++
			}
		}
	}
}

// checkSortedDead is checkDead for a sorted queue.
func checkSortedDead[K queue.SortKey](t *testing.T, what string, s *queue.Sorted[K], want []string) {
	t.Helper()
	dv, err := s.DeadValues(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var toks, reasons []string
	for _, d := range dv {
		toks, reasons = append(toks, tokenOf(d.Payload)), append(reasons, d.Reason)
	}
	checkDead(t, what, toks, reasons, want)
}

// TestSalvageKeepsUnsettledDeliveriesOfLostLeases: damage takes the entry
// that holds the lease record of X's first delivery, and the intact first
// delivery of A after it moves the replayed cursor past X. X must not be
// lost: delivered again when nothing settled it (or a Nack did), and not
// when its ack or dead-letter, before or after A's delivery, is intact, or
// the ack of its redelivery after a Nack.
func TestSalvageKeepsUnsettledDeliveriesOfLostLeases(t *testing.T) {
	for _, settle := range []string{"none", "ack", "ack after A", "dead-letter after A", "nack after A", "nack, redelivery, ack"} {
		t.Run(settle, func(t *testing.T) {
			dir := scratchDir(t)
			q := mustOpen(t, dir, &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
			defer q.Close()
			mustEnqueue(t, q, payload("X", 10)) // LSN 1
			mustEnqueue(t, q, payload("A", 10)) // LSN 2
			x, err := q.TryDequeue()            // lease LSN 3
			if err != nil || tokenOf(x.Payload) != "X" || x.Receipt.Lease != 3 {
				t.Fatalf("delivery of X: %v %v", x, err)
			}
			mustEnqueue(t, q, payload("B", 10)) // LSN 4: the lease above is written alone
			settleX := func() {
				t.Helper()
				var err error
				switch settle {
				case "dead-letter after A":
					err = x.DeadLetter("poison")
				case "nack after A", "nack, redelivery, ack":
					err = x.Nack(0)
				default:
					err = x.Ack()
				}
				if err != nil {
					t.Fatal(err)
				}
				if settle == "nack, redelivery, ack" {
					if x, err = q.TryDequeue(); err != nil || tokenOf(x.Payload) != "X" {
						t.Fatalf("redelivery of X: %v %v", x, err)
					}
					if err = x.Ack(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if settle == "ack" {
				settleX()
			}
			a, err := q.TryDequeue()
			if err != nil || tokenOf(a.Payload) != "A" {
				t.Fatalf("delivery of A: %v %v", a, err)
			}
			if settle != "none" && settle != "ack" {
				settleX()
			}
			if err := a.Ack(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				mustEnqueue(t, q, payload("F", 100))
			}
			d := lostEntryImage(t, dir, 3)
			want := []string{"B"}
			if settle == "none" || settle == "nack after A" {
				want = []string{"B", "X"} // sorted, as got is
			}
			var wantDead []string
			if settle == "dead-letter after A" {
				wantDead = []string{"X"}
			}
			o := drainOptions()
			o.Salvage = true
			q2 := mustOpen(t, d, &o)
			q3 := compactAndReopen(t, q2, d, wantDead)
			var got []string
			for _, tok := range drainTokens(t, q3) {
				if tok != "F" {
					got = append(got, tok)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("delivered %v besides the fillers, want %v (recovery %+v)", got, want, q3.Recovery())
			}
		})
	}
}

// TestSalvageKeepsValuesOfAnotherLostPull: without SingleFlight a key is
// pulled again while a batch of it is leased. Damage takes the first
// pull's record (A's batch); the second pull (C) and the settles are
// intact. The salvaging replay's second pull finds A still pending and
// takes it too. When A's batch was never settled, A must come back (its
// lease ended with the crash), not be acked or dead-lettered with C. When
// A's batch was acked (or dead-lettered) after C's pull, A is settled so,
// whatever C's batch became: never delivered again.
func TestSalvageKeepsValuesOfAnotherLostPull(t *testing.T) {
	for _, c := range []struct {
		name     string
		a, c     string // how A's and C's batches are settled: "ack", "dead" or "" (left leased)
		wantDead []string
		want     map[string]int // delivered after the salvage
	}{
		{"C acked", "", "ack", nil, map[string]int{"A": 1, "B": 1, "F": 100}},
		{"C dead-lettered", "", "dead", []string{"C"}, map[string]int{"A": 1, "B": 1, "F": 100}},
		{"A acked after C's pull, C acked", "ack", "ack", nil, map[string]int{"B": 1, "F": 100}},
		{"A dead-lettered after C's pull, C acked", "dead", "ack", []string{"A"}, map[string]int{"B": 1, "F": 100}},
		{"A acked after C's pull, C left leased", "ack", "", nil, map[string]int{"B": 1, "C": 1, "F": 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := scratchDir(t)
			o := queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true, AckTimeout: time.Hour}
			s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			publish := func(key, tok string, sort int64) {
				t.Helper()
				if err := s.Publish(context.Background(), sort, key, payload(tok, 10)); err != nil {
					t.Fatal(err)
				}
			}
			pull := func(tok string) *queue.Batch[int64] {
				t.Helper()
				bs, err := s.TryPull(1)
				if err != nil || len(bs) != 1 || bs[0].Key != "k" || len(bs[0].Values) != 1 || tokenOf(bs[0].Values[0].Payload) != tok {
					t.Fatalf("pull: %v %v, want key k with %s", bs, err, tok)
				}
				return bs[0]
			}
			settle := func(b *queue.Batch[int64], how string) {
				t.Helper()
				var err error
				switch how {
				case "ack":
					err = b.Ack()
				case "dead":
					err = b.DeadLetter("poison")
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			publish("k", "A", 1) // LSN 1
			publish("j", "B", 5) // LSN 2
			a := pull("A")       // LSN 3: the record the damage takes
			publish("k", "C", 3) // LSN 4
			cb := pull("C")      // LSN 5
			settle(a, c.a)
			settle(cb, c.c)
			for i := int64(0); i < 100; i++ {
				publish("f", "F", 10+i)
			}
			d := lostEntryImage(t, dir, 3)

			so := drainOptions()
			so.Salvage = true
			s2, err := queue.OpenSorted[int64](d, &queue.SortedOptions{Options: so})
			if err != nil {
				t.Fatal(err)
			}
			checkSortedDead(t, "after the salvage", s2, c.wantDead)
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			s3, err := queue.OpenSorted[int64](d, &queue.SortedOptions{Options: drainOptions()})
			if err != nil {
				t.Fatal(err)
			}
			defer s3.Close()
			count := countPulled(t, s3)
			if fmt.Sprint(count) != fmt.Sprint(c.want) {
				t.Fatalf("delivered %v, want %v: what settled A's batch (%q) holds", count, c.want, c.a)
			}
		})
	}
}

package index_test

import (
	"testing"

	"github.com/walq/walq/index"
)

// BenchmarkTableLeaseAck measures the table's part of a delivery from the
// log cursor and its ack: a new Leased entry put, and an entry deleted,
// with 64 deliveries in flight (the queue's drain and cycle workloads).
func BenchmarkTableLeaseAck(b *testing.B) {
	const inFlight = 64
	t := index.NewTable()
	put := func(seq uint64) {
		t.Put(index.Entry{Seq: seq, Loc: seq, ID: "0f8e9c6a-3f51-4d7e-9b1a-5c2d7e8f9a0b", Size: 140,
			EnqueuedAt: int64(seq) * 1000, Deliveries: 1, State: index.Leased,
			Due: int64(seq)*1000 + 30e9, Lease: seq + 1, DeliveredAt: int64(seq) * 1000})
	}
	for seq := uint64(1); seq <= inFlight; seq++ {
		put(3 * seq)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		put(3 * (i + inFlight + 1))
		if _, ok := t.Delete(3 * (i + 1)); !ok {
			b.Fatal("entry not found")
		}
	}
}

// BenchmarkTableDelayCycle measures the table's part of a dequeue that
// finds a delay ended, and of the nack with a delay that follows: the
// time set (one of 1,000 delayed entries comes due), the first ready
// entry leased, and put back delayed.
func BenchmarkTableDelayCycle(b *testing.B) {
	const delayed = 1000
	t := index.NewTable()
	for seq := uint64(1); seq <= delayed; seq++ {
		t.Put(index.Entry{Seq: seq, Loc: seq, Size: 140, Deliveries: 1, State: index.Delayed, Due: int64(seq)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range int64(b.N) {
		now := i + 1
		t.SetNow(now)
		e, ok := t.FirstReady()
		if !ok {
			b.Fatal("no entry due")
		}
		e.State, e.Due, e.Lease = index.Leased, now+30e9, uint64(now)
		t.Put(e)
		e.State, e.Due, e.Lease = index.Delayed, now+delayed, 0
		t.Put(e)
	}
}

// BenchmarkTableReadyCycle is BenchmarkTableDelayCycle for a message made
// ready again without a delay, while nothing is delayed: the time set to
// no effect, the first ready entry leased and put back ready.
func BenchmarkTableReadyCycle(b *testing.B) {
	const ready = 1000
	t := index.NewTable()
	for seq := uint64(1); seq <= ready; seq++ {
		t.Put(index.Entry{Seq: seq, Loc: seq, Size: 140, Deliveries: 1, State: index.Ready})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range int64(b.N) {
		t.SetNow(i + 1)
		e, ok := t.FirstReady()
		if !ok {
			b.Fatal("no entry ready")
		}
		e.State, e.Due, e.Lease = index.Leased, i+30e9, uint64(i+1)
		t.Put(e)
		e.State, e.Due, e.Lease = index.Ready, 0, 0
		t.Put(e)
	}
}

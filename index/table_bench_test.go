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

package queue

import (
	"fmt"
	"io"
	"testing"

	"github.com/walq/walq/index"
)

// BenchmarkSnapshotEncode measures the background snapshot's encoding of
// a table of 100,000 leased entries (a queue with that many deliveries in
// flight), per entry.
func BenchmarkSnapshotEncode(b *testing.B) {
	const n = 100_000
	st := newState(&Options{})
	for i := range uint64(n) {
		seq := 3*i + 1
		st.table.Put(index.Entry{Seq: seq, Loc: seq, ID: fmt.Sprintf("%08x-3f51-4d7e-9b1a-5c2d7e8f9a0b", i),
			Size: 140, EnqueuedAt: 1_700_000_000e9 + int64(i), Deliveries: 1, State: index.Leased,
			Due: 1_700_000_030e9 + int64(i), Lease: seq + 1, DeliveredAt: 1_700_000_000e9 + int64(i)})
	}
	f := st.freeze()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := f.encodeTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}

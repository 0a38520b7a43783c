package index_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/walq/walq/index"
)

// sortKey encodes i the way the queue encodes an int64 sort key: eight
// big-endian bytes.
func sortKey(i int) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63)
}

// publishN publishes n values over keys keys, with sort keys ascending per
// key, as a fresh slice per value (as a decoded record gives it).
func publishN(s *index.Sorted, n, keys int) {
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprint("key-", k)
	}
	for i := range n {
		seq := uint64(i + 1)
		s.Publish(index.SortedValue{Key: names[i%keys], Sort: sortKey(i), Seq: seq, Loc: seq, At: int64(i), Size: 150})
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSortedMemory reports the live heap bytes a Sorted index holds
// per pending value (no payload cache), for 1,000,000 values over a number
// of keys, and the time per publish.
func BenchmarkSortedMemory(b *testing.B) {
	const n = 1_000_000
	for _, keys := range []int{1, 10_000, n / 2, n} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			for range b.N {
				before := liveHeap()
				s := index.NewSorted(true)
				publishN(s, n, keys)
				after := liveHeap()
				b.ReportMetric(float64(after-before)/n, "bytes/value")
				runtime.KeepAlive(s)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/publish")
		})
	}
}

// BenchmarkSortedPublishPull measures one publish plus its share of pulls
// and acks with 100 values per key pending.
func BenchmarkSortedPublishPull(b *testing.B) {
	const keys = 1000
	s := index.NewSorted(true)
	publishN(s, 100*keys, keys)
	lease := uint64(1 << 40)
	b.ResetTimer()
	for i := range b.N {
		seq := uint64(1<<32) + uint64(i)
		s.Publish(index.SortedValue{Key: fmt.Sprint("key-", i%keys), Sort: sortKey(100*keys + i), Seq: seq, Loc: seq, Size: 150})
		if i%100 == 99 {
			lease++
			pullAck(b, s, lease)
		}
	}
}

// pullAck takes the first key of the pull order under lease and acks it.
func pullAck(b *testing.B, s *index.Sorted, lease uint64) {
	key, _, ok := s.Next()
	if !ok {
		b.Fatal("nothing to pull")
	}
	bt := s.Take(key, lease, 0, 1)
	if _, ok := s.Ack(bt.Lease); !ok {
		b.Fatal("ack of a leased batch failed")
	}
}

// BenchmarkSortedPublishPullSingle measures one publish plus one pull and
// ack with 100,000 keys of one pending value each: every publish adds a
// key to the pull order and every pull takes the first one out.
func BenchmarkSortedPublishPullSingle(b *testing.B) {
	const keys = 100_000
	s := index.NewSorted(true)
	publishN(s, keys, keys)
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprint("new-", i)
	}
	lease := uint64(1 << 40)
	b.ResetTimer()
	for i := range b.N {
		seq := uint64(1<<32) + uint64(i)
		s.Publish(index.SortedValue{Key: names[i], Sort: sortKey(keys + i), Seq: seq, Loc: seq, Size: 150})
		lease++
		pullAck(b, s, lease)
	}
}

// BenchmarkSortedOldestAfterDrop measures MinPublishedAt on one key of
// 100,000 pending values (publish times in sort order) after its oldest
// value was dropped on its own and a newer one published (drop), and
// again with nothing changed since the last call (again).
func BenchmarkSortedOldestAfterDrop(b *testing.B) {
	const n = 100_000
	for _, again := range []bool{false, true} {
		b.Run(map[bool]string{false: "drop", true: "again"}[again], func(b *testing.B) {
			s := index.NewSorted(true)
			publishN(s, n, 1)
			next := n // the next value to publish
			b.ResetTimer()
			for range b.N {
				if !again {
					gone := next - n // the oldest value
					if !s.Drop(index.SortedValue{Key: "key-0", Sort: sortKey(gone), Seq: uint64(gone + 1)}) {
						b.Fatal("the oldest value was not found")
					}
					s.Publish(index.SortedValue{Key: "key-0", Sort: sortKey(next), Seq: uint64(next + 1), Loc: uint64(next + 1),
						At: int64(next), Size: 150})
					next++
				}
				if at, ok := s.MinPublishedAt(); !ok || at != int64(next-n) {
					b.Fatalf("MinPublishedAt %d %v, want %d", at, ok, next-n)
				}
			}
		})
	}
}

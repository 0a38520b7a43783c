package queue

import (
	"fmt"
	"testing"

	"github.com/walq/walq/index"
)

// BenchmarkSnapshotLocked measures what a snapshot does under the queue's
// lock (freeze the state, find the lowest LSN the live messages need) with
// a million delayed messages, or a million pending sorted values, against
// none.
func BenchmarkSnapshotLocked(b *testing.B) {
	const n = 1_000_000
	cases := []struct {
		name string
		fill func(st *state)
	}{
		{"backlog=none", func(*state) {}},
		{"backlog=1M-delayed", func(st *state) {
			for i := uint64(1); i <= n; i++ {
				st.table.Put(index.Entry{Seq: i, Loc: i, Size: 40, EnqueuedAt: int64(i), State: index.Delayed, Due: 1 << 62})
			}
		}},
		{"backlog=1M-sorted", func(st *state) {
			for i := uint64(1); i <= n; i++ {
				st.sorted.Publish(index.SortedValue{Key: fmt.Sprintf("k%d", i%(n/10)), Sort: []byte{byte(i >> 8), byte(i)},
					Seq: i, Loc: i, Size: 40, At: int64(i)})
			}
		}},
	}
	for _, c := range cases {
		q := &Queue{}
		q.mu.st = newState(&Options{})
		c.fill(q.mu.st)
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				q.mu.Lock()
				q.mu.st.freeze()
				q.lowWaterLocked()
				q.mu.Unlock()
			}
		})
	}
}

package queue

import (
	"fmt"
	"testing"
)

// BenchmarkReplayApply measures state.Apply, as an open after a crash
// calls it for each record since the snapshot, on the records of the
// lives of 10,000 messages with a 100-byte payload and a generated id:
// the enqueue of each (plain, or with a producer id), the lease of its
// first delivery, and its ack. One op applies one record; every 30,000
// records, a new state (untimed) replays them again.
func BenchmarkReplayApply(b *testing.B) {
	for _, producerID := range []bool{false, true} {
		b.Run(fmt.Sprintf("producer-id=%v", producerID), func(b *testing.B) {
			recs := messageLives(10_000, producerID)
			st := newState(&Options{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := i % len(recs)
				if k == 0 && i > 0 {
					b.StopTimer()
					st = newState(&Options{})
					b.StartTimer()
				}
				if err := st.Apply(uint64(k+1), recs[k]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// messageLives returns the encoded records, from LSN 1 on, of the lives
// of n messages: the enqueue, lease and ack of each in turn.
func messageLives(n int, producerID bool) [][]byte {
	recs := make([][]byte, 0, 3*n)
	at := int64(1_790_000_000_000_000_000)
	for range n {
		enq := record{Op: opEnqueue, ID: newID(), At: at, Payload: make([]byte, 100)}
		if producerID {
			enq.Flags = flagProducerID
		}
		seq := uint64(len(recs) + 1)
		e := encodeRecord(nil, &enq)
		lease := encodeRecord(nil, &record{Op: opLease, Seq: seq, ID: enq.ID, Enq: at, Size: uint32(len(e)), At: at + 1, Due: at + 30e9})
		ack := encodeRecord(nil, &record{Op: opAck, Seq: seq, Lease: seq + 1, At: at + 2})
		recs = append(recs, e, lease, ack)
	}
	return recs
}

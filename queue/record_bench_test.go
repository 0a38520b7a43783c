package queue

import "testing"

// BenchmarkRecordCodec measures the encoding and decoding of the records
// of one message's life: its enqueue (100-byte payload, a generated id),
// the lease of its first delivery, and its ack.
func BenchmarkRecordCodec(b *testing.B) {
	enq := record{Op: opEnqueue, ID: newID(), At: 1_790_000_000_000_000_000, Payload: make([]byte, 100)}
	lease := record{Op: opLease, Seq: 123_456, ID: enq.ID, Enq: enq.At, Size: 160, At: enq.At + 1e6, Due: enq.At + 30e9}
	ack := record{Op: opAck, Seq: 123_456, Lease: 123_460, At: enq.At + 2e6}
	for _, tc := range []struct {
		name string
		r    *record
	}{{"enqueue", &enq}, {"lease", &lease}, {"ack", &ack}} {
		b.Run("encode/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for range b.N {
				buf = encodeRecord(buf[:0], tc.r)
			}
		})
	}
	encEnq := encodeRecord(nil, &enq)
	b.Run("decode-aliased/enqueue", func(b *testing.B) {
		b.ReportAllocs()
		var r record
		for range b.N {
			if err := decodeRecordAliased(encEnq, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

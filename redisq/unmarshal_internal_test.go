package redisq

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgframe"
	"github.com/walq/walq/queue"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDamagedRecordAllocatesLittle: a stored record of a few bytes whose
// bin header claims 2 GiB is refused as undecodable by each reader of
// stored records (a message, a pulled value, a listed dead value) without
// allocating what the header claims.
func TestDamagedRecordAllocatesLittle(t *testing.T) {
	const claims2GiB = "\xc6\x7f\xff\xff\xff"
	message := "\x94\xa0\x00\xc0" + claims2GiB + "0123456789abcdef" // body{ID, At, Headers, Payload}
	value := "\x93" + claims2GiB + "0123456789abcdef"               // sortedValue{Sort, At, Payload}
	s := &Sorted[int64]{}
	for name, refused := range map[string]func() bool{
		"message": func() bool {
			_, err := decodeMessage(message, queue.Receipt{Seq: 1})
			return err != nil
		},
		"pulled value": func() bool {
			_, err := s.decodeBatch([]any{"7", "k", []any{[]any{int64(1), int64(1), value}}}, time.Now())
			return err != nil
		},
		"dead value": func() bool { // listed, its reason saying why it does not decode
			d, err := deadValue[int64]([]any{"1", "\x00\x01k", "x", "1", value})
			return err == nil && strings.Contains(d.Reason, corruptReason)
		},
	} {
		t.Run(name, func(t *testing.T) {
			var ok bool
			n := allocated(func() { ok = refused() })
			require.True(t, ok, "the record is refused as undecodable")
			// The bound leaves room for what other goroutines of the
			// test binary allocate meanwhile; the header claims 32 times it.
			require.Less(t, n, uint64(64<<20), "bytes allocated to read a record of about %d bytes", len(message))
		})
	}
}

// TestStoredRecordsFit: every record the library stores fits its
// framing; no prefix of one does.
func TestStoredRecordsFit(t *testing.T) {
	long := strings.Repeat("x", 70000)
	values := map[string]any{
		"message": &body{ID: "id", At: 1, Headers: map[string]string{"h": "v"}, Payload: []byte("p")},
		"message no id, no headers, empty payload": &body{},
		"message 256-byte payload":                 &body{Payload: []byte(long[:256])},
		"message 70000-byte payload":               &body{Payload: []byte(long)},
		"value":                                    &sortedValue{Sort: []byte{1, 2, 3, 4, 5, 6, 7, 8}, At: -1, Payload: []byte("p")},
		"value nil sort":                           &sortedValue{At: 1},
		"value 70000-byte sort and payload":        &sortedValue{Sort: []byte(long), Payload: []byte(long)},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			b, err := msgpack.Marshal(v)
			require.NoError(t, err)
			require.NoError(t, msgframe.Check(b), "the whole record")
			step := 1 + len(b)/500
			for i := 0; i < len(b); i += step {
				require.ErrorIs(t, msgframe.Check(b[:i]), msgframe.ErrPastEnd, "its first %d of %d bytes", i, len(b))
			}
			require.ErrorIs(t, msgframe.Check(b[:len(b)-1]), msgframe.ErrPastEnd, "all but its last byte")
		})
	}
}

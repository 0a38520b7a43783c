package redisq

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestSortedValueTimeLayout: a stored value's publish time is always an
// int64 (d3) right after its sort part, small times included, as the
// fence of RequeueDeadValue reads it.
func TestSortedValueTimeLayout(t *testing.T) {
	for _, at := range []int64{0, 1, 127, -1, -40, 1 << 40} {
		b, err := msgpack.Marshal(&sortedValue{Sort: []byte{1, 2, 3, 4, 5, 6, 7, 8}, At: at, Payload: nil})
		if err != nil {
			t.Fatal(err)
		}
		if b[11] != 0xd3 {
			t.Errorf("At %d encoded % x", at, b)
		}
	}
}

// TestStoredAt: storedAt reads the publish time of a stored value with a
// sort part of any length (nil, bin8, bin16, bin32), and nothing from one
// cut short.
func TestStoredAt(t *testing.T) {
	for _, n := range []int{-1, 0, 8, 255, 256, 70000} {
		var sort []byte
		if n >= 0 {
			sort = make([]byte, n)
		}
		for _, at := range []int64{1, -5, 1764700000123456789} {
			b, err := msgpack.Marshal(&sortedValue{Sort: sort, At: at, Payload: []byte("p")})
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := storedAt(b); !ok || got != at {
				t.Errorf("sort of %d bytes, at %d: read %d, %v", n, at, got, ok)
			}
			cut := len(b) - 3 - 1 // the payload (c4 01 p) and the time's last byte
			if _, ok := storedAt(b[:cut]); ok {
				t.Errorf("sort of %d bytes: read a time from a value cut short", n)
			}
		}
	}
}

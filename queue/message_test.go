package queue

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestNewMessage checks that a delivery's Message holds a copy of the
// payload that is independent of the input, keeps nil and empty apart,
// cannot grow into its neighbour, and costs one allocation up to maxRoom
// bytes.
func TestNewMessage(t *testing.T) {
	r := int(192 - messageSize)
	for _, n := range []int{-1, 0, 1, r, r + 1, 100, r + 64, r + 65, r + 320, r + 321, 1024, 1280 - int(messageSize+mallocHeader), 1281 - int(messageSize+mallocHeader), int(maxRoom), int(maxRoom) + 1, 4096} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var p []byte
			if n >= 0 {
				p = bytes.Repeat([]byte{0xa5}, n)
			}
			m := newMessage(p)
			require.Equal(t, p == nil, m.Payload == nil, "nil and empty stay apart")
			require.Equal(t, p, m.Payload)
			require.Equal(t, len(p), cap(m.Payload), "no room to grow in place")
			if n > 0 {
				p[0] = 0
				require.Equal(t, byte(0xa5), m.Payload[0], "a copy, not a view")
				grown := append(m.Payload, 1)
				grown[0] = 1
				require.Equal(t, byte(0xa5), m.Payload[0], "append moves it")
			}
			want := 1.0
			if n > int(maxRoom) {
				want = 2
			}
			require.Equal(t, want, testing.AllocsPerRun(100, func() { newMessage(p) }))
		})
	}
}

// TestNewMessageRooms checks that each Message with its payload room fills
// an allocator size class exactly, so the room costs no bytes of padding.
func TestNewMessageRooms(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the rooms are sized for 64-bit platforms")
	}
	require.Equal(t, uintptr(192), unsafe.Sizeof(withPayload[[192 - messageSize]byte]{}))
	require.Equal(t, uintptr(256), unsafe.Sizeof(withPayload[[256 - messageSize]byte]{}))
	require.Equal(t, uintptr(512), unsafe.Sizeof(withPayload[[512 - messageSize]byte]{}))
	require.Equal(t, uintptr(1024-8), unsafe.Sizeof(withPayload[[1024 - messageSize - mallocHeader]byte]{}))
	require.Equal(t, uintptr(1152-8), unsafe.Sizeof(withPayload[[1152 - messageSize - mallocHeader]byte]{}))
	require.Equal(t, uintptr(1280-8), unsafe.Sizeof(withPayload[[1280 - messageSize - mallocHeader]byte]{}))
	require.Equal(t, uintptr(1536-8), unsafe.Sizeof(withPayload[[1536 - messageSize - mallocHeader]byte]{}))
	require.Equal(t, uintptr(1792-8), unsafe.Sizeof(withPayload[[1792 - messageSize - mallocHeader]byte]{}))
	require.Equal(t, uintptr(2048-8), unsafe.Sizeof(withPayload[[maxRoom]byte]{}))
	require.Equal(t, uintptr(0), messageSize%8, "Message keeps the rooms aligned")
	// What the allocator takes: the class, not the next one up (an
	// object above 512 bytes that holds pointers carries a header).
	for _, class := range []int{192, 256, 512, 1024, 1152, 1280, 1536, 1792, 2048} {
		room := class - int(messageSize)
		if class > 512 {
			room -= int(mallocHeader)
		}
		p := make([]byte, room)
		const n = 1000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			newMessage(p)
		}
		runtime.ReadMemStats(&after)
		require.Less(t, int(after.TotalAlloc-before.TotalAlloc)/n, class+16, "bytes per Message with %d bytes of payload", room)
	}
}

// TestDecodeEncodedAliased checks that the aliasing decoder reads the same
// record as the copying one, with the payload a view into the input, and
// an empty payload that is not one.
func TestDecodeEncodedAliased(t *testing.T) {
	for _, payload := range [][]byte{nil, {}, []byte("hello"), bytes.Repeat([]byte("x"), 300)} {
		t.Run(strconv.Itoa(len(payload)), func(t *testing.T) {
			in := &record{Op: opEnqueue, ID: "id-1", At: 7, Headers: map[string]string{"k": "v"}, Payload: payload}
			b := encodeRecord(nil, in)
			var copied, aliased record
			require.True(t, decodeEncoded(b, &copied))
			require.True(t, decodeEncodedAliased(b, &aliased))
			require.Equal(t, copied, aliased)
			require.Equal(t, payload == nil, aliased.Payload == nil)
			if len(payload) > 0 {
				for i := range b {
					b[i] = 0
				}
				require.Equal(t, make([]byte, len(payload)), aliased.Payload, "a view into the input")
				require.Equal(t, payload, copied.Payload, "a copy")
			}
		})
	}
}

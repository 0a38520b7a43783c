package redisq

import (
	"encoding/binary"
	"errors"

	"github.com/vmihailenco/msgpack/v5"
)

// errClaimsPastEnd is returned by unmarshalStored for a stored record
// whose msgpack framing announces more bytes or elements than it holds.
var errClaimsPastEnd = errors.New("msgpack framing claims more than the record holds")

// unmarshalStored decodes the msgpack record raw, read from the server,
// into v. msgpack.Unmarshal allocates the length a bin header announces
// before it reads the bytes: a damaged record of 20 bytes claiming a
// bin32 of 2 GiB would cost 2 GiB each time it is read (by Dequeue, Pull,
// DeadLetters or DeadValues). So the framing is checked first: every
// length must fit in what follows it.
func unmarshalStored(raw string, v any) error {
	if !framingFits([]byte(raw)) {
		return errClaimsPastEnd
	}
	return msgpack.Unmarshal([]byte(raw), v)
}

// framingFits reports whether the first msgpack value in b announces no
// string, binary or extension longer than the bytes that follow its
// header, and no array or map with more elements than there are bytes
// left (each element takes one at least).
func framingFits(b []byte) bool {
	for values := uint64(1); values > 0; {
		if len(b) == 0 {
			return false
		}
		head, body, elems, ok := frame(b)
		if !ok || uint64(len(b)-head) < body {
			return false
		}
		b = b[head+int(body):]
		values += elems - 1 // at most twice len(b): no overflow
		if values > uint64(len(b)) {
			return false
		}
	}
	return true
}

// frame reads the msgpack header at b[0]: its length in bytes (head), the
// bytes of content that follow it (body), and the values nested in it
// (elems: an array's elements, a map's keys and values). False when the
// header is invalid or cut short.
func frame(b []byte) (head int, body, elems uint64, ok bool) {
	c := b[0]
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return 1, 0, 0, true
	case c >= 0x80 && c <= 0x8f:
		return 1, 0, 2 * uint64(c&0x0f), true
	case c >= 0x90 && c <= 0x9f:
		return 1, 0, uint64(c & 0x0f), true
	case c >= 0xa0 && c <= 0xbf:
		return 1, uint64(c & 0x1f), 0, true
	}
	switch c {
	case 0xcc, 0xd0:
		return 1, 1, 0, true
	case 0xcd, 0xd1:
		return 1, 2, 0, true
	case 0xca, 0xce, 0xd2:
		return 1, 4, 0, true
	case 0xcb, 0xcf, 0xd3:
		return 1, 8, 0, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: a type byte, 1 to 16 bytes
		return 1, 1 + 1<<(c-0xd4), 0, true
	case 0xc4, 0xd9: // bin8, str8
		n, ok := length(b, 1)
		return 2, n, 0, ok
	case 0xc5, 0xda: // bin16, str16
		n, ok := length(b, 2)
		return 3, n, 0, ok
	case 0xc6, 0xdb: // bin32, str32
		n, ok := length(b, 4)
		return 5, n, 0, ok
	case 0xc7, 0xc8, 0xc9: // ext8, ext16, ext32: the length, then a type byte
		size := 1 << (c - 0xc7)
		n, ok := length(b, size)
		return 1 + size, n + 1, 0, ok
	case 0xdc, 0xdd: // array16, array32
		size := 2 << (c - 0xdc)
		n, ok := length(b, size)
		return 1 + size, 0, n, ok
	case 0xde, 0xdf: // map16, map32
		size := 2 << (c - 0xde)
		n, ok := length(b, size)
		return 1 + size, 0, 2 * n, ok
	}
	return 0, 0, 0, false // 0xc1: never used
}

// length reads the big-endian length of size bytes after b[0].
func length(b []byte, size int) (uint64, bool) {
	if len(b) < 1+size {
		return 0, false
	}
	switch size {
	case 1:
		return uint64(b[1]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(b[1:])), true
	default:
		return uint64(binary.BigEndian.Uint32(b[1:])), true
	}
}

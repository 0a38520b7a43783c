package msgframe

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxDepth is the deepest nesting of arrays and maps Check accepts, as
// deep as encoding/json decodes.
const MaxDepth = 10000

var (
	// ErrPastEnd is returned by Check when a header is invalid, is cut
	// short, or claims more bytes or values than the input holds.
	ErrPastEnd = errors.New("msgframe: msgpack framing claims more than the input holds")
	// ErrTooDeep is returned by Check when arrays and maps nest deeper
	// than MaxDepth.
	ErrTooDeep = errors.New("msgframe: msgpack value nested too deep")
)

// Check returns nil if the first msgpack value in b fits its framing (see
// the package doc); bytes after that value are not looked at.
func Check(b []byte) error {
	_, err := check(b, 0)
	return err
}

// CheckAll returns nil if b is msgpack values, one after another to its
// last byte, that each fit their framing. A decoder that reads more values
// than the headers count needs it: msgpack's CustomEncoder may write one
// Go value as several msgpack values (Encoder.EncodeMulti), and the
// values after those the headers count are decoded as well.
func CheckAll(b []byte) error {
	for off := 0; off < len(b); {
		end, err := check(b, off)
		if err != nil {
			return err
		}
		off = end
	}
	return nil
}

// check is Check of the value at b[off:]; it returns the offset after it.
func check(b []byte, off int) (int, error) {
	var open []uint64 // values left in each array or map entered, innermost last
	left := uint64(1) // values left to read, in all of open
	for left > 0 {
		if off == len(b) {
			return 0, fmt.Errorf("%w: %d values missing at the end", ErrPastEnd, left)
		}
		head, body, elems, ok := frame(b[off:])
		if !ok || uint64(len(b)-off-head) < body {
			return 0, fmt.Errorf("%w: header 0x%02x at offset %d", ErrPastEnd, b[off], off)
		}
		off += head + int(body)
		left += elems - 1 // at most twice len(b): no overflow
		if left > uint64(len(b)-off) {
			return 0, fmt.Errorf("%w: %d values claimed, %d bytes left at offset %d", ErrPastEnd, left, len(b)-off, off)
		}
		if len(open) > 0 {
			open[len(open)-1]--
		}
		if elems > 0 {
			if len(open) == MaxDepth {
				return 0, fmt.Errorf("%w: more than %d levels at offset %d", ErrTooDeep, MaxDepth, off)
			}
			open = append(open, elems)
		}
		for len(open) > 0 && open[len(open)-1] == 0 {
			open = open[:len(open)-1]
		}
	}
	return off, nil
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

// Package msgid makes the ids that queues give messages enqueued without
// one: random version-4 UUIDs in their 36-character text form, the same
// for the embedded queue and the Redis backend. New is safe for
// concurrent use.
package msgid

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// New returns a random version-4 UUID.
func New() string { return format(rand.Uint64(), rand.Uint64()) }

// format returns the text form of the UUID whose bytes 0-7 are a's and
// 8-15 are c's, least significant byte first, with the version (4) and
// variant (10) bits set. An id is made per enqueue: the digits are made
// eight at a time (hex8) rather than by encoding/hex's loop, which cost
// more than the random numbers.
func format(a, c uint64) string {
	a = a&^(0xf0<<48) | 0x40<<48                          // byte 6: version 4 in its high nibble
	c = c&^0xc0 | 0x80                                    // byte 8: variant 10 in its top bits
	a, c = bits.ReverseBytes64(a), bits.ReverseBytes64(c) // byte 0 first
	var s [36]byte
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	le := binary.LittleEndian
	le.PutUint64(s[0:], hex8(uint32(a>>32)))
	w := hex8(uint32(a))
	le.PutUint32(s[9:], uint32(w))
	le.PutUint32(s[14:], uint32(w>>32))
	w = hex8(uint32(c >> 32))
	le.PutUint32(s[19:], uint32(w))
	le.PutUint32(s[24:], uint32(w>>32))
	le.PutUint64(s[28:], hex8(uint32(c)))
	return string(s[:])
}

// hex8 returns the eight lower-case hex digits of x, most significant
// first, as the bytes of a little-endian uint64.
func hex8(x uint32) uint64 {
	// Spread the nibbles, one per byte, nibble i in byte i.
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	v = (v | v<<8) & 0x00ff00ff00ff00ff
	v = (v | v<<4) & 0x0f0f0f0f0f0f0f0f
	v = bits.ReverseBytes64(v) // the most significant nibble in byte 0
	// '0'+n for every byte, and 'a'-'0'-10 more where n > 9 (n+6 carries
	// into bit 4 of its byte, and no byte carries into the next).
	above9 := (v + 0x0606060606060606) >> 4 & 0x0101010101010101
	return v + 0x3030303030303030 + above9*('a'-'0'-10)
}

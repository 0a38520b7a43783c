// Package msgid makes the ids that queues give messages enqueued without
// one: random version-4 UUIDs in their 36-character text form, the same
// for the embedded queue and the Redis backend. New is safe for
// concurrent use.
package msgid

import (
	"encoding/hex"
	"math/rand/v2"
)

// New returns a random version-4 UUID.
func New() string {
	var b [16]byte
	a, c := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		b[i], b[8+i] = byte(a>>(8*i)), byte(c>>(8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

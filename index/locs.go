package index

import (
	"cmp"
	"math/bits"
)

// locSet holds the Loc of every value the index holds (pending, leased or
// dead), so that the lowest is known in O(log n). Locs are unique: each is
// the LSN of the one record that holds that value's payload.
//
// A backlog's Locs are mostly neighbouring LSNs (publishes follow each
// other in the log), so the set keeps them as bitmaps of 64 LSNs: 16
// bytes per word in a chunkSet, under a byte per Loc when most LSNs of a
// stretch of log are pending values, and 16 bytes for a Loc alone in its
// 64, as much as a B-tree of Locs costs anyway.
type locSet struct {
	words *chunkSet[locWord]
}

// locWord is the Locs base..base+63 that the set holds, as bits.
type locWord struct {
	base uint64 // a multiple of 64
	bits uint64 // bit i: base+i is in the set; never 0 in the set
}

func newLocSet() locSet {
	return locSet{words: newChunkSet(func(a, b locWord) int { return cmp.Compare(a.base, b.base) })}
}

func (c *locSet) add(loc uint64) {
	w := locWord{base: loc &^ 63, bits: 1 << (loc & 63)}
	if p := c.words.Get(w); p != nil {
		p.bits |= w.bits
		return
	}
	c.words.ReplaceOrInsert(w)
}

func (c *locSet) remove(loc uint64) {
	w := locWord{base: loc &^ 63, bits: 1 << (loc & 63)}
	p := c.words.Get(w)
	if p == nil {
		return
	}
	if p.bits &^= w.bits; p.bits == 0 {
		c.words.Delete(w)
	}
}

// min returns the lowest Loc, or false when the set is empty.
func (c *locSet) min() (uint64, bool) {
	w, ok := c.words.Min()
	if !ok {
		return 0, false
	}
	return w.base + uint64(bits.TrailingZeros64(w.bits)), true
}

package index

import (
	"slices"
	"sort"
	"strings"
	"unsafe"
)

// pendingValue is a pending value inside its key's list: a SortedValue
// without the key, which the list's owner holds once for all its values.
type pendingValue struct {
	sort       string // sort key (sharing SortedValue.Sort's bytes, which are never changed)
	timeKey           // at: unix ns of the publish; seq: LSN of the publish record
	loc        uint64 // LSN of the record holding the payload
	size       uint32 // bytes of the record at loc
	deliveries uint32 // times pulled so far
}

func (p *pendingValue) value(key string) SortedValue {
	return SortedValue{Key: key, Sort: sortBytes(p.sort), Seq: p.seq, Loc: p.loc, At: p.at, Size: p.size, Deliveries: p.deliveries}
}

func pendingOf(v SortedValue) pendingValue {
	return pendingValue{sort: sortString(v.Sort), timeKey: timeKey{at: v.At, seq: v.Seq}, loc: v.Loc, size: v.Size,
		deliveries: v.Deliveries}
}

// sortString and sortBytes convert a sort key without copying it: a
// string header is 8 bytes smaller than a slice header, and sort keys are
// never changed once published.
func sortString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func sortBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// cmpPending orders values by sort key, then by seq.
func cmpPending(a *pendingValue, sort string, seq uint64) int {
	if c := strings.Compare(a.sort, sort); c != 0 {
		return c
	}
	switch {
	case a.seq < seq:
		return -1
	case a.seq > seq:
		return 1
	}
	return 0
}

// chunkMax is the most values a chunk holds: large enough that a chunk's
// overhead is small per value, small enough that an insertion in the
// middle moves little memory.
const chunkMax = 128

// chunk is a run of a key's values in order.
type chunk struct {
	vals []pendingValue // 1..chunkMax values in order
	// mark holds two numbers in one word, so that a chunk stays in its
	// 32-byte size class: above markBits, the generation that may change
	// the chunk in place (see valueList); below, the index in vals of the
	// chunk's earliest (at, seq), from which a key's oldest is found
	// without a scan of every value (sorted_age.go).
	mark uint64
}

// markBits is the width of a chunk's oldest index in its mark: room for
// chunkMax values. Generations count snapshots of the index and stay far
// below 1<<(64-markBits).
const markBits = 8

// newChunk returns a chunk of vals (at least one), changeable in gen.
func newChunk(vals []pendingValue, gen uint64) *chunk {
	c := &chunk{vals: vals, mark: gen << markBits}
	c.findOldest()
	return c
}

// gen returns the generation that may change the chunk in place.
func (c *chunk) gen() uint64 { return c.mark >> markBits }

// oldestAt returns the index in vals of the chunk's earliest (at, seq).
func (c *chunk) oldestAt() int { return int(c.mark & (1<<markBits - 1)) }

func (c *chunk) setOldest(i int) { c.mark = c.mark&^(1<<markBits-1) | uint64(i) }

// oldest returns the chunk's earliest (at, seq).
func (c *chunk) oldest() timeKey { return c.vals[c.oldestAt()].timeKey }

// findOldest sets the chunk's oldest index from a scan of its values.
func (c *chunk) findOldest() {
	o := 0
	for i := 1; i < len(c.vals); i++ {
		if lessTimeKey(c.vals[i].timeKey, c.vals[o].timeKey) {
			o = i
		}
	}
	c.setOldest(o)
}

// valueList holds one key's pending values in (sort, seq) order, in
// chunks. Values published in order fill chunks completely (a value after
// the last one starts a new chunk instead of splitting a full one).
//
// Snapshots share chunks copy-on-write: a list or chunk whose gen is not
// the index's current generation may be seen by a snapshot, so it is
// copied before it changes.
type valueList struct {
	chunks []*chunk // in order; none empty
	n      int      // values in all chunks
	gen    uint64   // generation that may change chunks (the slice) in place
	oldest timeKey  // the earliest (at, seq) of the key's values, its first included; in Sorted.ages (see sorted_age.go)
}

// own makes the chunk slice changeable in generation gen.
func (l *valueList) own(gen uint64) {
	if l.gen != gen {
		l.chunks = slices.Clone(l.chunks)
		l.gen = gen
	}
}

// ownChunk makes chunk i changeable in generation gen and returns it.
func (l *valueList) ownChunk(i int, gen uint64) *chunk {
	l.own(gen)
	c := l.chunks[i]
	if c.gen() != gen {
		c = &chunk{vals: slices.Clone(c.vals), mark: gen<<markBits | uint64(c.oldestAt())}
		l.chunks[i] = c
	}
	return c
}

// chunkFor returns the index of the chunk where (sort, seq) is or would
// go: the first whose last value is not below it, else the last chunk.
func (l *valueList) chunkFor(sortKey string, seq uint64) int {
	i := sort.Search(len(l.chunks), func(i int) bool {
		vals := l.chunks[i].vals
		return cmpPending(&vals[len(vals)-1], sortKey, seq) >= 0
	})
	return min(i, len(l.chunks)-1)
}

// find returns the position of the value (sort, seq).
func (l *valueList) find(sortKey string, seq uint64) (ci, i int, ok bool) {
	if l.n == 0 {
		return 0, 0, false
	}
	ci = l.chunkFor(sortKey, seq)
	vals := l.chunks[ci].vals
	i, ok = slices.BinarySearchFunc(vals, struct{}{}, func(v pendingValue, _ struct{}) int {
		return cmpPending(&v, sortKey, seq)
	})
	return ci, i, ok
}

// insert adds v in order; a value already present (same sort key and
// seq) is replaced, and returned with true.
func (l *valueList) insert(v pendingValue, gen uint64) (pendingValue, bool) {
	if l.n == 0 {
		l.own(gen)
		l.chunks = append(l.chunks[:0], newChunk([]pendingValue{v}, gen))
		l.n = 1
		return pendingValue{}, false
	}
	ci, i, found := l.find(v.sort, v.seq)
	if found {
		c := l.ownChunk(ci, gen)
		old := c.vals[i]
		c.vals[i] = v
		switch {
		case i == c.oldestAt():
			c.findOldest()
		case lessTimeKey(v.timeKey, c.oldest()):
			c.setOldest(i)
		}
		return old, true
	}
	c := l.ownChunk(ci, gen)
	if len(c.vals) >= chunkMax {
		if ci == len(l.chunks)-1 && i == len(c.vals) {
			l.chunks = append(l.chunks, newChunk(append(make([]pendingValue, 0, 4), v), gen))
			l.n++
			return pendingValue{}, false
		}
		c = l.split(ci, gen)
		if i > len(c.vals) {
			i -= len(c.vals)
			ci++
			c = l.chunks[ci]
		}
	}
	if len(c.vals) == cap(c.vals) {
		c.vals = growChunk(c.vals)
	}
	o := c.oldestAt()
	c.vals = slices.Insert(c.vals, i, v)
	if o >= i {
		o++
	}
	if lessTimeKey(v.timeKey, c.vals[o].timeKey) {
		o = i
	}
	c.setOldest(o)
	l.n++
	return pendingValue{}, false
}

// growChunk returns vals with room for about a quarter more values (append
// would double it: a chunk's spare room is memory every value pays for).
// A short chunk doubles, from one value: a key's second value alone costs
// 48 bytes more, not four values' room.
func growChunk(vals []pendingValue) []pendingValue {
	more := len(vals) / 4
	if len(vals) < 8 {
		more = max(1, len(vals))
	}
	grown := make([]pendingValue, len(vals), min(chunkMax, len(vals)+more))
	copy(grown, vals)
	return grown
}

// split halves the full chunk ci (owned in gen) and returns its first half.
func (l *valueList) split(ci int, gen uint64) *chunk {
	c := l.chunks[ci]
	half := len(c.vals) / 2
	next := newChunk(slices.Clone(c.vals[half:]), gen)
	c.vals = c.vals[:half] // the rest of its array is free room
	c.findOldest()
	l.chunks = slices.Insert(l.chunks, ci+1, next)
	return c
}

// removeAt removes the value at (ci, i) and returns it.
func (l *valueList) removeAt(ci, i int, gen uint64) pendingValue {
	c := l.ownChunk(ci, gen)
	v := c.vals[i]
	o := c.oldestAt()
	c.vals = slices.Delete(c.vals, i, i+1)
	switch {
	case len(c.vals) == 0:
		l.chunks = slices.Delete(l.chunks, ci, ci+1)
	case i == o:
		c.findOldest()
	case i < o:
		c.setOldest(o - 1)
	}
	l.n--
	return v
}

// earliest returns the earliest (at, seq) of the list's values (it holds
// at least one), from its chunks' own: a look at each chunk, not at each
// value.
func (l *valueList) earliest() timeKey {
	o := l.chunks[0].oldest()
	for _, c := range l.chunks[1:] {
		if t := c.oldest(); lessTimeKey(t, o) {
			o = t
		}
	}
	return o
}

// each calls fn for every value in order until fn returns false; it
// reports whether it went through them all.
func eachValue(chunks []*chunk, fn func(*pendingValue) bool) bool {
	for _, c := range chunks {
		for i := range c.vals {
			if !fn(&c.vals[i]) {
				return false
			}
		}
	}
	return true
}

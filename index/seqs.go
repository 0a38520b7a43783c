package index

import (
	"math"

	"github.com/google/btree"
)

// seqs holds the table's entries by Seq. Seqs are LSNs of enqueue records,
// so the entries of a queue at work are a window of recent, increasing
// seqs, leased and settled roughly in order. seqs keeps that window in
// chunks of slots indexed by the offset of a Seq from base: Get, Put and
// Delete of an entry in the window take constant time and move no other
// entry. A settled entry leaves a hole; a chunk left empty is freed, and
// the empty chunks at the front are dropped as base moves on.
//
// An entry far behind the window (a dead letter or a long delay that
// outlives millions of later messages) would hold the whole span open, so
// it is moved out of the window into old, a btree, once the window spans
// more than spanSlack chunks beyond spanPerLive slots per live entry. A
// Seq below base goes to old as well. Every Seq in old is below base.
//
// Memory: a slot is an Entry (108 B with its string headers), so a dense
// window costs about half the btree's 225 B per entry, one entry in three
// seqs (a queue's enqueue, lease and ack records interleaved) about 1.4
// times it, and the sparsest window kept, one in spanPerLive, about 1.9
// times it; sparser entries go to old.
//
// Snapshots are copy-on-write: a snapshot takes the chunk pointers and a
// clone of old, and raises gen; a chunk from an older generation is
// copied before it is changed.
type seqs struct {
	base   uint64               // Seq of the first slot of chunks[0]; at least 1, above every Seq in old
	chunks []*entryChunk        // chunk i holds Seqs base+i*slotsPerChunk on; nil when it holds none
	live   int                  // entries in chunks
	gen    uint64               // generation of the chunks this set may change in place
	spare  *entryChunk          // an empty chunk of this generation, kept for reuse; nil when none
	old    *btree.BTreeG[Entry] // entries below base, by Seq
}

const (
	slotsPerChunk = 32 // slots per chunk
	spanPerLive   = 4  // window slots allowed per live entry before spilling
	spanSlack     = 64 // window chunks always allowed
)

// entryChunk is slotsPerChunk slots; slot i holds the entry whose Seq is the
// chunk's first Seq plus i, or a zero Entry (Seq 0) when there is none.
type entryChunk struct {
	gen   uint64 // the seqs generation that owns it; older ones are shared with a snapshot
	n     int    // entries present
	slots [slotsPerChunk]Entry
}

func newSeqs() seqs { return seqs{base: 1, old: btree.NewG(degree, lessEntry)} }

// Len is the number of entries.
func (s *seqs) Len() int { return s.live + s.old.Len() }

// slot returns the chunk index and the slot within it for seq, and whether
// seq falls in the window.
func (s *seqs) slot(seq uint64) (int, int, bool) {
	if seq < s.base {
		return 0, 0, false
	}
	off := seq - s.base
	i := off / slotsPerChunk
	if i >= uint64(len(s.chunks)) {
		return 0, 0, false
	}
	return int(i), int(off % slotsPerChunk), true
}

// Get returns the entry with sequence seq.
func (s *seqs) Get(seq uint64) (Entry, bool) {
	if seq < s.base {
		return s.old.Get(Entry{Seq: seq})
	}
	i, j, ok := s.slot(seq)
	if !ok || s.chunks[i] == nil || s.chunks[i].slots[j].Seq == 0 {
		return Entry{}, false
	}
	return s.chunks[i].slots[j], true
}

// Put inserts e or replaces the entry with the same Seq, and returns the
// entry replaced.
func (s *seqs) Put(e Entry) (Entry, bool) {
	if !s.fit(e.Seq) {
		return s.old.ReplaceOrInsert(e)
	}
	i, j, _ := s.slot(e.Seq)
	c := s.own(i)
	prev := c.slots[j]
	c.slots[j] = e
	if prev.Seq != 0 {
		return prev, true
	}
	c.n++
	s.live++
	return Entry{}, false
}

// Delete removes the entry with sequence seq and returns it.
func (s *seqs) Delete(seq uint64) (Entry, bool) {
	if seq < s.base {
		return s.old.Delete(Entry{Seq: seq})
	}
	i, j, ok := s.slot(seq)
	if !ok || s.chunks[i] == nil || s.chunks[i].slots[j].Seq == 0 {
		return Entry{}, false
	}
	c := s.own(i)
	e := c.slots[j]
	c.slots[j] = Entry{}
	c.n--
	s.live--
	if c.n == 0 {
		s.chunks[i], s.spare = nil, c
		s.trim()
	}
	return e, true
}

// fit makes the window reach seq and reports whether it does; if not, the
// entry belongs in old. It starts a new window when the window is empty,
// grows it at the front when seq is a little behind it, and at the back,
// spilling what lies far behind when the span would grow too long.
func (s *seqs) fit(seq uint64) bool {
	if s.live == 0 {
		s.restart(seq)
	}
	if seq < s.base {
		return s.reachBack(seq)
	}
	for s.span(seq) > s.maxSpan() && s.live > 0 {
		s.spillFront()
		if s.live == 0 {
			s.restart(seq)
		}
		if seq < s.base {
			return false
		}
	}
	for len(s.chunks) < s.span(seq) {
		s.chunks = append(s.chunks, nil)
	}
	return true
}

// span is the number of chunks the window spans once it reaches seq, at
// or above base.
func (s *seqs) span(seq uint64) int { return int((seq-s.base)/slotsPerChunk) + 1 }

// reachBack grows the window at the front by whole chunks to reach seq,
// below base, if the new base stays above every Seq in old and the span
// stays short enough, and reports whether it did.
func (s *seqs) reachBack(seq uint64) bool {
	k := (s.base - seq + slotsPerChunk - 1) / slotsPerChunk
	if k*slotsPerChunk >= s.base || int(k)+len(s.chunks) > s.maxSpan() {
		return false
	}
	if m, ok := s.old.Max(); ok && m.Seq >= s.base-k*slotsPerChunk {
		return false
	}
	s.chunks = append(make([]*entryChunk, k, int(k)+len(s.chunks)), s.chunks...)
	s.base -= k * slotsPerChunk
	return true
}

// maxSpan is the number of chunks the window may span.
func (s *seqs) maxSpan() int { return spanSlack + (s.live+1)*spanPerLive/slotsPerChunk }

// restart empties the window and starts it at seq, or just above the
// highest Seq in old.
func (s *seqs) restart(seq uint64) {
	if m, ok := s.old.Max(); ok && m.Seq >= seq {
		seq = m.Seq + 1
	}
	seq = max(seq, 1) // Seq 0 marks an empty slot: it is never in the window
	s.base, s.chunks = seq, s.chunks[:0]
}

// spillFront moves the entries of the first chunk into old and drops it.
func (s *seqs) spillFront() {
	if c := s.chunks[0]; c != nil {
		for _, e := range c.slots {
			if e.Seq != 0 {
				s.old.ReplaceOrInsert(e)
			}
		}
		s.live -= c.n
	}
	s.chunks[0] = nil
	s.trim()
}

// trim drops the empty chunks at both ends of the window.
func (s *seqs) trim() {
	n := 0
	for n < len(s.chunks) && s.chunks[n] == nil {
		n++
	}
	if n == len(s.chunks) {
		s.chunks = s.chunks[:0]
		s.base = pastChunks(s.base, n)
		return
	}
	if n > 0 {
		clear(s.chunks[:n]) // already nil; keeps the slice's front free of pointers
		s.chunks = s.chunks[n:]
		s.base += uint64(n) * slotsPerChunk
	}
	for len(s.chunks) > 0 && s.chunks[len(s.chunks)-1] == nil {
		s.chunks = s.chunks[:len(s.chunks)-1]
	}
}

// pastChunks returns the Seq n chunks after base, or the highest Seq when
// that is past the top of the range. The highest Seq is never in old (a
// Seq goes there below base, or spilled from below a later Seq), so as
// base it stays above every Seq in old.
func pastChunks(base uint64, n int) uint64 {
	if d := uint64(n) * slotsPerChunk; base <= math.MaxUint64-d {
		return base + d
	}
	return math.MaxUint64
}

// own returns chunk i, made or copied so that this set may change it.
func (s *seqs) own(i int) *entryChunk {
	c := s.chunks[i]
	switch {
	case c == nil && s.spare != nil && s.spare.gen == s.gen:
		c, s.spare = s.spare, nil
	case c == nil:
		c = &entryChunk{gen: s.gen}
	case c.gen != s.gen:
		cp := *c
		cp.gen = s.gen
		c = &cp
	default:
		return c
	}
	s.chunks[i] = c
	return c
}

// Ascend calls fn for every entry in Seq order until fn returns false.
func (s *seqs) Ascend(fn func(Entry) bool) {
	stopped := false
	s.old.Ascend(func(e Entry) bool {
		stopped = !fn(e)
		return !stopped
	})
	if !stopped {
		ascendChunks(s.chunks, fn)
	}
}

func ascendChunks(chunks []*entryChunk, fn func(Entry) bool) {
	for _, c := range chunks {
		if c == nil {
			continue
		}
		for k := range c.slots {
			if c.slots[k].Seq != 0 && !fn(c.slots[k]) {
				return
			}
		}
	}
}

// freeze returns a frozen copy of the set, and makes every chunk it
// shares with the copy copy-on-write for the set.
func (s *seqs) freeze() seqs {
	s.gen++
	s.spare = nil
	return seqs{
		base: s.base, chunks: append([]*entryChunk(nil), s.chunks...), live: s.live,
		gen: s.gen - 1, old: s.old.Clone(),
	}
}
